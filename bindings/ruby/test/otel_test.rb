# frozen_string_literal: true

require_relative "test_helper"
require "pyroscope/otel"

# The OpenTelemetry SDK cannot be installed here (no RubyGems, no Debian
# package). These are the pieces of its documented interface the span
# processor touches, written from opentelemetry-api/-sdk 1.x:
#   OpenTelemetry::Trace.current_span(context)  the span a Context holds
#   Span#context (SpanContext: trace_id 16 raw bytes, span_id 8, remote?),
#   Span#parent_span_id (8 zero bytes: none), Span#name, #set_attribute.
module OpenTelemetry
  module Trace
    def self.current_span(context = nil)
      (context.respond_to?(:span) && context.span) || OtelTest::INVALID_SPAN
    end
  end
end

class OtelTest < Minitest::Test
  include PyroscopeTest

  SpanContext = Struct.new(:trace_id, :span_id, :remote) do
    def remote?
      remote
    end
  end

  # An SDK span as the processor sees it in on_start/on_finish.
  class Span
    attr_reader :name, :context, :parent_span_id, :attributes

    def initialize(name, parent: nil, remote: false)
      @name = name
      @context = SpanContext.new(Random.bytes(16), Random.bytes(8), remote)
      @parent_span_id = parent ? parent.context.span_id : ("\0" * 8).b
      @attributes = {}
    end

    def set_attribute(key, value)
      @attributes[key] = value
      self
    end

    def hex_id
      context.span_id.unpack1("H*")
    end
  end

  # The parent Context the SDK passes to on_start.
  Context = Struct.new(:span)
  INVALID_SPAN = Span.new("invalid")

  def setup
    @processor = Pyroscope::Otel::SpanProcessor.new
  end

  def labels
    Pyroscope::Native.labels_current
  end

  def start(span, parent = nil, processor: @processor)
    processor.on_start(span, Context.new(parent))
    span
  end

  def test_local_root_span_is_labelled_and_annotated
    span = start(Span.new("GET /users"))
    id = span.hex_id
    assert_match(/\A\h{16}\z/, id)
    assert_equal id, span.attributes["pyroscope.profile.id"]
    assert_equal({ "span_id" => id, "trace_id" => span.context.trace_id.unpack1("H*"),
                   "span_name" => "GET /users" }, labels)
    @processor.on_finish(span)
    assert_equal({}, labels)
    assert_equal 0, @processor.errors
  end

  def test_child_spans_run_under_the_roots_labels
    root = start(Span.new("root"))
    root_labels = labels
    child = start(Span.new("child", parent: root), root)
    assert_empty child.attributes
    assert_equal root_labels, labels
    @processor.on_finish(child)
    assert_equal root_labels, labels
    @processor.on_finish(root)
    assert_equal({}, labels)
  end

  def test_remote_parent_makes_a_local_root
    remote = Span.new("upstream", remote: true)
    span = start(Span.new("handler", parent: remote), remote)
    assert_equal span.hex_id, labels["span_id"]
    @processor.on_finish(span)
    assert_equal({}, labels)
  end

  def test_every_span_with_root_span_only_off
    processor = Pyroscope::Otel::SpanProcessor.new(root_span_only: false, add_span_name: false)
    a = start(Span.new("a"), processor: processor)
    b = start(Span.new("b", parent: a), a, processor: processor)
    assert_equal b.hex_id, labels["span_id"]
    refute labels.key?("span_name")
    assert_equal b.hex_id, b.attributes["pyroscope.profile.id"]
    processor.on_finish(b)
    assert_equal a.hex_id, labels["span_id"]
    processor.on_finish(a)
    assert_equal({}, labels)
  end

  # a ends before b: b's end must not bring a's labels back.
  def test_out_of_order_ends
    processor = Pyroscope::Otel::SpanProcessor.new(root_span_only: false)
    Pyroscope.tag_wrapper("req" => "1") do
      a = start(Span.new("a"), processor: processor)
      b = start(Span.new("b", parent: a), a, processor: processor)
      processor.on_finish(a)
      assert_equal b.hex_id, labels["span_id"]
      processor.on_finish(b)
      assert_equal({ "req" => "1" }, labels)
    end
  end

  def test_labels_changed_during_the_span_are_kept
    span = start(Span.new("s"))
    Pyroscope._add_tags("user" => "7")
    @processor.on_finish(span)
    assert_equal({ "user" => "7" }, labels)
  ensure
    Pyroscope._remove_tags("user" => "7")
  end

  def test_span_finished_on_another_fiber
    span = nil
    worker = Fiber.new do
      span = start(Span.new("in fiber"))
      Fiber.yield labels
      # The span finished elsewhere: its labels go at the next span here.
      stale = labels
      other = start(Span.new("next"))
      now = labels
      @processor.on_finish(other)
      [stale, now, labels]
    end
    in_fiber = worker.resume
    assert_equal span.hex_id, in_fiber["span_id"]
    assert_equal({}, labels, "the root fiber never had the span's labels")
    Pyroscope.tag_wrapper("mine" => "1") do
      @processor.on_finish(span)
      assert_equal({ "mine" => "1" }, labels, "only the span's own keys are removed here")
    end
    stale, now, after = worker.resume
    assert_equal span.hex_id, stale["span_id"]
    assert_equal "next", now["span_name"]
    refute_equal span.hex_id, now["span_id"]
    assert_equal({}, after)
  end

  def test_span_names_become_valid_label_values
    span = start(Span.new("GET /users/{id}?a=b,c"))
    assert_equal "GET /users/_id_?a_b_c", labels["span_name"]
    @processor.on_finish(span)
    long = start(Span.new("é" * 3000))
    assert_equal 2048, labels["span_name"].bytesize
    assert labels["span_name"].valid_encoding?
    @processor.on_finish(long)
    empty = start(Span.new(""))
    refute labels.key?("span_name")
    @processor.on_finish(empty)
    assert_equal({}, labels)
  end

  def test_errors_never_reach_the_application
    broken = Object.new
    def broken.parent_span_id = ("\0" * 8).b
    def broken.context = raise("no context")
    _, err = capture_io do
      @processor.on_start(broken, Context.new(nil))
      @processor.on_finish(broken)
    end
    assert_equal 2, @processor.errors
    assert_match(/span processor on_start failed/, err)
    assert_equal({}, labels)
  end

  def test_flush_and_shutdown_return_the_sdks_codes
    assert_equal 0, @processor.force_flush
    assert_equal 0, @processor.force_flush(timeout: 1)
    assert_equal 0, @processor.shutdown(timeout: 1)
    span = start(Span.new("after shutdown"))
    assert_empty span.attributes
    assert_equal({}, labels)
  end

  # pyroscope-otel's constructor: (app_name, endpoint) and the URL attribute.
  def test_pyroscope_otel_constructor_and_profile_url
    processor = Pyroscope::Otel::SpanProcessor.new("shop.cpu", "http://pyroscope:4040")
    assert processor.root_span_only
    assert processor.add_span_name
    span = start(Span.new("x"), processor: processor)
    url = URI.parse(span.attributes["pyroscope.profile.url"])
    assert_equal "pyroscope", url.host
    query = URI.decode_www_form(url.query).to_h
    assert_equal "shop.cpu{span_id=\"#{span.hex_id}\"}", query["query"]
    processor.on_finish(span)
  end

  # The samples of code that runs inside a span carry its span_id in the
  # profile; code outside it does not.
  def test_samples_inside_the_span_carry_its_id
    code = burn_source("in_span") + burn_source("outside") + <<~RUBY
      require "pyroscope/otel"
      Span = Struct.new(:name, :context, :parent_span_id, :attributes) do
        def set_attribute(k, v) = attributes[k] = v
      end
      Ctx = Struct.new(:trace_id, :span_id) { def remote? = false }
      processor = Pyroscope::Otel::SpanProcessor.new
      span = Span.new("work", Ctx.new(Random.bytes(16), ["00f067aa0ba902b7"].pack("H*")),
                      ("\\0" * 8).b, {})
      processor.on_start(span, nil)
      in_span(0.4)
      processor.on_finish(span)
      outside(0.4)
    RUBY
    profiles, = profile_child("otel.e2e", code, rate: 200)
    inside = value_by_label(profiles, "in_span", "span_id")
    out = value_by_label(profiles, "outside", "span_id")
    assert_operator inside["00f067aa0ba902b7"], :>, 0, inside.inspect
    assert_equal ["00f067aa0ba902b7"], inside.keys
    assert_operator out[nil], :>, 0, out.inspect
    assert_equal [nil], out.keys
  end
end
