# frozen_string_literal: true

# One benchmark run (a process of its own): a fixed CPU-bound workload on
# two threads (fib, hash churn, sort), under no profiler ("base"), stackprof
# ("stackprof", cpu mode) or pyroscope-native ("native"), both at HZ.
# Prints one JSON line: process CPU s (the profiler's threads included),
# wall s, peak RSS kB, samples taken.
require "json"
require "tmpdir"

mode = ARGV.fetch(0)
rounds = Integer(ARGV.fetch(1, "40"))
hz = Integer(ENV.fetch("BENCH_HZ", "100"))

def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

def chunk(seed)
  h = {}
  2000.times { |i| h["k#{(i * seed) % 997}"] = i }
  a = Array.new(3000) { |i| (i * 7919 + seed) % 10_007 }
  fib(20) + h.size + a.sort.first
end

case mode
when "stackprof" then require "stackprof"
when "native" then require "pyroscope/pyroscope_native"
end
out = Dir.mktmpdir

cpu0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
wall0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
case mode
when "stackprof" then StackProf.start(mode: :cpu, interval: 1_000_000 / hz)
when "native"
  Pyroscope::Native.start({"application_name" => "bench", "output_dir" => out,
                           "upload_interval" => 10, "sample_rate" => hz}, {})
end

threads = 2.times.map { |t| Thread.new { rounds.times { |i| chunk(i + t) } } }
threads.each(&:join)

extra = {}
samples = case mode
          when "stackprof"
            StackProf.stop
            StackProf.results[:samples]
          when "native"
            st = Pyroscope::Native.stop
            extra = st.slice("handler_ns", "job_ns", "sampler_cpu_ns", "ticks", "timeouts", "torn", "gc_samples")
            st["captured"]
          else 0
          end
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu0
wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall0
hwm = File.read("/proc/self/status")[/VmHWM:\s*(\d+)/, 1].to_i
puts JSON.generate({mode: mode, cpu: cpu, wall: wall, hwm_kb: hwm, samples: samples}.merge(extra))
