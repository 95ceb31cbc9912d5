# frozen_string_literal: true

require_relative "native_helper"

# The research prototype crashed ([BUG] frame2iseq) until captures that a GC
# overlapped were dropped and pending frames pinned: sample at 1 kHz while
# threads come and go, eval'd methods churn, Fibers and Enumerators switch
# and GC.compact runs every 200 ms. In a child process, so a crash is a
# failure and not the end of the test run.
class NativeStressTest < Minitest::Test
  include NativeHelper

  SCRIPT = <<~'RUBY'
    N.start(settings(dir, sample_rate: 1000, sampler_cpu_budget: 0), {})
    def deep(n, &blk) = n.zero? ? blk.call : deep(n - 1, &blk)
    stop_at = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ENV.fetch("STRESS_SECONDS"))
    compactor = Thread.new do
      while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop_at
        sleep 0.2
        GC.compact
      end
    end
    iter = 0
    workers = 4.times.map do |w|
      Thread.new do
        i = 0
        while Process.clock_gettime(Process::CLOCK_MONOTONIC) < stop_at
          i += 1
          name = "m_#{w}_#{i}"
          Object.class_eval("def #{name}(x) = (1..x).map { |v| v.to_s * 2 }.size", __FILE__, __LINE__)
          Thread.new do
            N.labels_push({"w" => w.to_s})
            deep(5 + i % 40) do
              send(name, 300)
              e = Enumerator.new { |y| 3.times { |k| y << k } }
              3.times { e.next }
              Fiber.new { N.labels_push({"f" => "1"}); burn(0.001) }.resume
            end
          end.join
          Object.send(:remove_method, name)
          iter += 1
        end
      end
    end
    workers.each(&:join)
    compactor.join
    st = N.stop
    n = decode_dir(dir).sum(&:count)
    puts "STATS #{st.inspect}"
    puts "DECODED #{n} ITER #{iter}"
  RUBY

  def test_gc_compact_and_churn_at_1khz
    out, st = run_ruby(SCRIPT, env: {"STRESS_SECONDS" => "6"})
    assert st.success?, "child failed (#{st.inspect}):\n#{out[-4000..] || out}"
    stats = eval(out[/^STATS (.*)$/, 1]) # rubocop:disable Security/Eval
    decoded = out[/DECODED (\d+)/, 1].to_i
    $stderr.puts out.lines.grep(/STATS|DECODED/).join if ENV["PN_VERBOSE"]
    assert_operator stats["captured"], :>, 200, out
    assert_operator decoded, :>, 200, out
    # Every capture is accounted for: recorded, timed out, or discarded
    # (torn by a GC, on the alternate stack, or too late) or still busy.
    assert_operator stats["torn"] + stats["altstack"], :<=, stats["discarded"], out
    assert_operator stats["requested"], :>=, stats["captured"], out
    # A capture is recorded unless the recording job found a frame a GC
    # step on another thread had freed or moved (torn_late).
    assert_equal stats["captured"], stats["recorded"] + stats["torn_late"], out
  end
end
