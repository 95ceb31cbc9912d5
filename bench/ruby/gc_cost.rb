# frozen_string_literal: true

# What a loaded, running pyroscope-native adds to each minor GC (its GC
# mark functions run inside the application's collections, where no
# per-sample figure sees them): thread CPU per GC.start(full_mark: false)
# on a small heap, the median of 40 batches of 50, after the profiler ran
# a workload at 100 Hz (so its frame cache is filled). Mode "loaded"
# requires the gem (through RubyGems, as an application does: that alone
# adds about 6 us per minor GC here, RubyGems' objects, not the
# extension's) and does not start it. Prints one JSON line. Compare
# builds with BENCH_AB=gc_cost ruby bench/ruby/ab.rb ... (see ab.rb).
#   ruby bench/ruby/gc_cost.rb native|loaded
require "json"
require "tmpdir"
require_relative "median"

mode = ARGV.fetch(0, "native")
def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

require "pyroscope/pyroscope_native"
if mode == "native"
  Pyroscope::Native.start({"application_name" => "gc", "output_dir" => Dir.mktmpdir, "upload_interval" => 10,
                           "sample_rate" => 100}, {})
end
# Work with varied stacks, so the profiler's frame cache holds a few
# hundred frames, as in an application.
50.times { |i| eval("def m#{i}(n) = n.zero? ? fib(18) : m#{i}(n - 1)"); send(:"m#{i}", i % 7) }
3.times { 50.times { |i| send(:"m#{i}", i % 7) } }
GC.start
batches = Array.new(40) do
  t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond)
  50.times { GC.start(full_mark: false, immediate_sweep: true) }
  (Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID, :nanosecond) - t) / 50.0 / 1000
end
stats = mode == "native" ? Pyroscope::Native.stop : {}
puts JSON.generate({mode: mode, minor_gc_us: median(batches), samples: stats["captured"]})
