# frozen_string_literal: true

require "pyroscope"
require "uri"

module Pyroscope
  # Links OpenTelemetry spans to profiles ("Traces to profiles" in Grafana).
  #
  #   require "pyroscope/otel"
  #   OpenTelemetry::SDK.configure do |c|
  #     c.add_span_processor(Pyroscope::Otel::SpanProcessor.new)
  #   end
  #
  # It has the interface of pyroscope-otel 0.1.4 (new(app_name, endpoint),
  # root_span_only, add_span_name, add_url), which no longer works with the
  # pyroscope gem 1.x, and the labels Pyroscope reads today.
  module Otel
    # The pyroscope-otel release whose interface this module keeps (code
    # that checks Pyroscope::Otel::VERSION keeps running).
    VERSION = "0.1.4"

    class Error < StandardError; end

    # An OpenTelemetry SDK span processor (duck type: on_start, on_finish,
    # force_flush, shutdown). When a local root span starts (no parent, or a
    # remote parent) it sets the span's attribute pyroscope.profile.id to the
    # span id (16 lowercase hex digits) and labels the samples of the Fiber
    # that runs it with span_id (the same value), trace_id (32 hex digits)
    # and span_name. Child spans run under the root's labels; with
    # root_span_only = false every span labels with its own.
    #
    # When the span finishes on the Fiber that started it, that Fiber's
    # labels become what they were before the span (spans finishing out of
    # order included); if something else changed them meanwhile (_add_tags),
    # only the span's own keys are removed. A span that finishes on another
    # Fiber or thread has its keys removed there, and its Fiber drops its
    # labels when a span next starts or finishes on it.
    #
    # Errors never reach the application: they are logged (Pyroscope.logger)
    # and counted in #errors. Labels do not need Pyroscope.configure.
    class SpanProcessor
      PROFILE_ID_ATTRIBUTE = "pyroscope.profile.id"
      PROFILE_URL_ATTRIBUTE = "pyroscope.profile.url"
      ZERO_SPAN_ID = ("\0" * 8).b.freeze
      MAX_VALUE_BYTES = 2048   # the core's label value limit
      MAX_OPEN_SPANS = 10_000  # spans that never finish are forgotten past this
      LOUD_ERRORS = 10         # warnings before errors are logged at debug level
      # The SDK's result codes (OpenTelemetry::SDK::Trace::Export), when the
      # SDK is not loaded.
      RESULTS = { SUCCESS: 0, FAILURE: 1, TIMEOUT: 2 }.freeze

      # A labelled span: the Fiber's previous labels (token), the labels it
      # added, the Fiber's labels right after, and the Fiber's stack of open
      # spans. retired: it finished, its labels go when the Fiber unwinds.
      Entry = Struct.new(:token, :labels, :expected, :stack, :retired)
      private_constant :Entry

      # pyroscope-otel's settings. app_name and pyroscope_endpoint only make
      # the pyroscope.profile.url attribute (add_url, when an endpoint is
      # given); app_name includes the profile type (".cpu").
      attr_accessor :app_name, :root_span_only, :add_span_name, :add_url
      attr_reader :pyroscope_endpoint, :errors

      def initialize(app_name = nil, pyroscope_endpoint = nil, root_span_only: true,
                     add_span_name: true, add_url: true)
        @app_name = app_name
        self.pyroscope_endpoint = pyroscope_endpoint
        @root_span_only = root_span_only
        @add_span_name = add_span_name
        @add_url = add_url
        @open = {}                 # [trace id, span id] => Entry; under @lock
        @lock = Mutex.new
        @stack_key = :"__pyroscope_otel_#{object_id}" # fiber-local (Thread#[])
        @shut = false
        @errors = 0
        @forgotten = 0
      end

      def pyroscope_endpoint=(endpoint)
        @pyroscope_endpoint = endpoint.nil? ? nil : URI.parse(endpoint.to_s)
      end

      # Spans dropped from the table of open spans (never finished).
      def forgotten_spans
        @lock.synchronize { @forgotten }
      end

      def on_start(span, parent_context)
        return if @shut || (@root_span_only && !local_root?(span, parent_context))

        ctx = span.context
        span_id = hex(ctx.span_id, 8)
        return unless span_id

        labels = { "span_id" => span_id }
        trace_id = hex(ctx.trace_id, 16)
        labels["trace_id"] = trace_id if trace_id
        name = label_value(span.name) if @add_span_name
        labels["span_name"] = name unless name.nil? || name.empty?

        stack = fiber_stack
        unwind(stack)
        token = Native.labels_push(labels)
        entry = Entry.new(token, labels, Native.labels_current, stack, false)
        stack.push(entry)
        remember([ctx.trace_id, ctx.span_id], entry)
        span.set_attribute(PROFILE_ID_ATTRIBUTE, span_id)
        span.set_attribute(PROFILE_URL_ATTRIBUTE, profile_url(span_id)) if @add_url && @pyroscope_endpoint
      rescue StandardError => e
        failed("on_start", e)
      end

      def on_finish(span)
        ctx = span.context
        entry = @lock.synchronize { @open.delete([ctx.trace_id, ctx.span_id]) }
        return unless entry

        entry.retired = true
        stack = fiber_stack
        if stack.equal?(entry.stack)
          unwind(stack)
        else
          Native.labels_remove(entry.labels)
        end
      rescue StandardError => e
        failed("on_finish", e)
      end

      # Uploads the profiler's current period too (when it runs), so the
      # samples of flushed spans can be found.
      def force_flush(timeout: nil)
        return result(:SUCCESS) unless Pyroscope.running?

        Native.flush(timeout.nil? ? 30.0 : [timeout.to_f, 0.0].max) ? result(:SUCCESS) : result(:TIMEOUT)
      rescue StandardError => e
        failed("force_flush", e)
        result(:FAILURE)
      end

      # Stops labelling new spans; the profiler itself keeps running.
      def shutdown(timeout: nil) # rubocop:disable Lint/UnusedMethodArgument
        @shut = true
        result(:SUCCESS)
      end

      private

      # No parent, or a parent from another process (its context is remote).
      def local_root?(span, parent_context)
        parent_id = span.parent_span_id
        return true if parent_id.nil? || parent_id.b == ZERO_SPAN_ID
        return false unless defined?(::OpenTelemetry::Trace) &&
                            ::OpenTelemetry::Trace.respond_to?(:current_span)

        parent = ::OpenTelemetry::Trace.current_span(parent_context)
        !parent.nil? && parent.context.remote? == true
      end

      # The open spans of the running Fiber, oldest first.
      def fiber_stack
        Thread.current[@stack_key] ||= []
      end

      # Drops the finished spans at the top of the Fiber's stack: back to the
      # labels before each, or, if they were changed since, without its keys.
      def unwind(stack)
        while (top = stack.last)&.retired
          stack.pop
          if Native.labels_current == top.expected
            Native.labels_restore(top.token)
          else
            Native.labels_remove(top.labels)
          end
        end
      end

      def remember(key, entry)
        @lock.synchronize do
          @open[key] = entry
          while @open.size > MAX_OPEN_SPANS
            @open.shift
            @forgotten += 1
          end
        end
      end

      def hex(bytes, size)
        return nil unless bytes.is_a?(String) && bytes.bytesize == size

        text = bytes.unpack1("H*")
        text.count("0") == text.size ? nil : text
      end

      # A span name as a valid label value ("" when nothing is left).
      def label_value(name)
        text = name.to_s.dup.force_encoding(Encoding::UTF_8).scrub("?").tr("{},=", "____")
        text.byteslice(0, MAX_VALUE_BYTES).scrub("")
      end

      def profile_url(span_id)
        url = @pyroscope_endpoint.dup
        from = Time.now.to_i
        query = "#{@app_name || default_app_name}{span_id=\"#{span_id}\"}"
        url.query = URI.encode_www_form(query: query, from: from, until: from + 3600)
        url.to_s
      end

      def default_app_name
        config = Pyroscope.current_config
        name = config && (config.app_name || config.application_name)
        "#{name}.#{config.nil? || config.oncpu ? 'cpu' : 'wall'}"
      end

      def result(name)
        if defined?(::OpenTelemetry::SDK::Trace::Export) &&
           ::OpenTelemetry::SDK::Trace::Export.const_defined?(name)
          return ::OpenTelemetry::SDK::Trace::Export.const_get(name)
        end

        RESULTS.fetch(name)
      end

      def failed(what, error)
        @errors += 1
        Pyroscope.log(@errors <= LOUD_ERRORS ? 30 : 10,
                      "span processor #{what} failed (#{error.class}: #{error.message}); the " \
                      "span's samples may be unlabelled")
      end
    end
  end
end
