# frozen_string_literal: true

require_relative "native_helper"

# A thread that lives through stop and a new start: its slot of the first
# agent's driver is stale (the driver was freed), and it must join the new
# one (asked by its own signal) and be sampled again.
class NativeRestartTest < Minitest::Test
  include NativeHelper
  N = Pyroscope::Native

  # Burns until told to stop, publishing the CPU it used (its own clock).
  def long_lived(state)
    until state.stop
      burn(0.01)
      state.cpu = thread_cpu
    end
  end

  def test_thread_alive_across_two_agents
    state = Struct.new(:stop, :cpu).new(false, 0.0)
    worker = Thread.new { long_lived(state) }
    counts = 2.times.map do
      Dir.mktmpdir do |dir|
        N.start(settings(dir), {})
        burn(0.05)
        # This thread waits while the worker uses 0.4 s of CPU (60 at
        # most): on a loaded machine that takes longer than 0.4 s, and its
        # samples follow its CPU.
        from = state.cpu
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
        sleep 0.05 until state.cpu - from >= 0.4 || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        stats = N.stop
        n = decode_dir(dir).select { |s| s.stack.any? { |f| f.include?("long_lived") } }.sum(&:count)
        [n, stats]
      end
    end
    state.stop = true
    worker.join
    counts.each_with_index do |(n, stats), i|
      assert_operator n, :>=, 10, "agent #{i + 1}: #{stats.inspect}"
    end
  end
end
