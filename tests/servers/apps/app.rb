# frozen_string_literal: true

# Workload for tests/servers (see app.py): two threads burn 2:1 under
# worker=a / worker=b, the smaller one inside a root span; settings from the
# environment. Prints one JSON line. The OpenTelemetry SDK gem is not
# installable here, so the span is a minimal object with the SDK's interface
# (as bindings/ruby/test/otel_test.rb); the processor is ours, unchanged.
require "json"
require "securerandom"
require "pyroscope"
require "pyroscope/otel"

module OpenTelemetry
  module Trace
    def self.current_span(context = nil)
      (context.respond_to?(:span) && context.span) || nil
    end
  end
end

SpanContext = Struct.new(:trace_id, :span_id) do
  def remote?
    false
  end
end

class RootSpan
  attr_reader :name, :context, :parent_span_id

  def initialize(name)
    @name = name
    @context = SpanContext.new(SecureRandom.bytes(16), SecureRandom.bytes(8))
    @parent_span_id = ("\0" * 8).b
  end

  def set_attribute(_key, _value)
    self
  end
end

UNIT = Float(ARGV[0])

def cpu
  Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
end

def burn_a(seconds, out)
  Pyroscope.tag_wrapper({ "worker" => "a" }) do
    t = cpu
    nil while cpu - t < seconds
    out[:a] = ((cpu - t) * 1e9).to_i
  end
end

def burn_b(seconds, out, processor)
  span = RootSpan.new("burn-b-root")
  processor.on_start(span, nil)
  Pyroscope.tag_wrapper({ "worker" => "b" }) do
    t = cpu
    nil while cpu - t < seconds
    out[:b] = ((cpu - t) * 1e9).to_i
  end
  processor.on_finish(span)
  out[:span_id] = span.context.span_id.unpack1("H*")
  out[:trace_id] = span.context.trace_id.unpack1("H*")
end

Pyroscope.configure { |c| c.application_name = ARGV[1] }
processor = Pyroscope::Otel::SpanProcessor.new
out = {}
ts = [Thread.new { burn_a(2 * UNIT, out) }, Thread.new { burn_b(UNIT, out, processor) }]
ts.each(&:join)
Pyroscope.shutdown
out[:stats] = Pyroscope.respond_to?(:stats) ? Pyroscope.stats : {}
puts JSON.generate(out)
