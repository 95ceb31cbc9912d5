# frozen_string_literal: true

require_relative "native_helper"

# A thread that lives through stop and a new start: its slot of the first
# agent's driver is stale (the driver was freed), and it must join the new
# one (asked by its own signal) and be sampled again.
class NativeRestartTest < Minitest::Test
  include NativeHelper
  N = Pyroscope::Native

  def long_lived(stop) = (burn(0.01) until stop.value)

  def test_thread_alive_across_two_agents
    stop = Struct.new(:value).new(false)
    worker = Thread.new { long_lived(stop) }
    counts = 2.times.map do
      Dir.mktmpdir do |dir|
        N.start(settings(dir), {})
        burn(0.05)
        sleep 0.6 # the worker runs; this thread waits
        stats = N.stop
        n = decode_dir(dir).select { |s| s.stack.any? { |f| f.include?("long_lived") } }.sum(&:count)
        [n, stats]
      end
    end
    stop.value = true
    worker.join
    counts.each_with_index do |(n, stats), i|
      assert_operator n, :>=, 10, "agent #{i + 1}: #{stats.inspect}"
    end
  end
end
