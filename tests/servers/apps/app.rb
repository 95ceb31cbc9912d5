# frozen_string_literal: true

# Workload for tests/servers (see app.py): two threads burn 2:1 under
# worker=a / worker=b, the smaller one inside a root span; settings from the
# environment. Prints one JSON line. The OpenTelemetry SDK gem is not
# installable here, so the span is a minimal object with the SDK's interface
# (as bindings/ruby/test/otel_test.rb); the processor is ours, unchanged.
#
#   app.rb UNIT APP     the CPU workload (UNIT: CPU seconds of the small burner)
#   app.rb memory APP   the memory workload: churn_objects makes and drops
#                       CHURN objects under worker=a and a span, keep_objects
#                       keeps KEEP under worker=b and another span, alive until
#                       shutdown (one period: its in-use snapshot holds them).
#                       Truth in objects: the profile counts each as one
#                       40 B heap slot, whatever it mallocs besides.
#   app.rb memory-periods APP   the same, then the kept ones held for two more
#                       periods (from kept_at, wall time), freed (freed_at),
#                       and two periods more with other objects kept under
#                       worker=c.
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

# Runs the block under a root span and labels; the span's ids (hex).
def in_span(processor, name, labels)
  span = RootSpan.new(name)
  processor.on_start(span, nil)
  Pyroscope.tag_wrapper(labels) { yield }
  processor.on_finish(span)
  [span.context.span_id.unpack1("H*"), span.context.trace_id.unpack1("H*")]
end

def burn_b(seconds, out, processor)
  out[:span_id], out[:trace_id] = in_span(processor, "burn-b-root", { "worker" => "b" }) do
    t = cpu
    nil while cpu - t < seconds
    out[:b] = ((cpu - t) * 1e9).to_i
  end
end

CHURN = 1_000_000
KEEP = 400_000

def churn_objects(n) = n.times { Object.new }
def keep_objects(n) = Array.new(n) { Object.new }

def memory_workload(processor, out)
  out[:span_a] = in_span(processor, "churn", { "worker" => "a" }) { churn_objects(CHURN) }.first
  out[:span_b] = in_span(processor, "keep", { "worker" => "b" }) { $kept = keep_objects(KEEP) }.first
  GC.start # the churned objects swept: the in-use snapshot sees only the kept ones
  out[:churn_objects] = CHURN
  out[:keep_objects] = KEEP
end

# Until the profiler has cut n more periods (their pace, not a sleep: a
# loaded machine's run late), at most a minute.
def wait_periods(n)
  stop = Pyroscope.stats["periods"] + n
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
  sleep 0.05 while Pyroscope.stats["periods"] < stop &&
                   Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
end

def hold_then_free(out)
  out[:kept_at] = Time.now.to_f
  wait_periods(2)
  $kept = nil
  GC.start
  out[:freed_at] = Time.now.to_f
  $late = Pyroscope.tag_wrapper({ "worker" => "c" }) { keep_objects(100_000) } # in use after the free
  wait_periods(2)
end

Pyroscope.configure { |c| c.application_name = ARGV[1] }
processor = Pyroscope::Otel::SpanProcessor.new
out = {}
if ARGV[0].start_with?("memory")
  memory_workload(processor, out)
  hold_then_free(out) if ARGV[0] == "memory-periods"
else
  unit = Float(ARGV[0])
  ts = [Thread.new { burn_a(2 * unit, out) }, Thread.new { burn_b(unit, out, processor) }]
  ts.each(&:join)
end
Pyroscope.shutdown
out[:stats] = Pyroscope.respond_to?(:stats) ? Pyroscope.stats : {}
puts JSON.generate(out)
