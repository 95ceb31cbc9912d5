# frozen_string_literal: true

# One benchmark run (a process of its own): a fixed CPU-bound workload on
# two threads (fib, hash churn, sort), under no profiler ("base"), stackprof
# ("stackprof") or pyroscope-native ("native"), both at BENCH_HZ.
# BENCH_SP_MODE: stackprof's mode (cpu: ITIMER_PROF, which the kernel's tick
# caps at a few hundred signals a second; wall: ITIMER_REAL, any rate).
# BENCH_BUDGET: our sampler_cpu_budget (unset: the default; 0: no limit).
# Prints one JSON line: process CPU s (the profiler's threads included),
# wall s, peak RSS kB, and RSS / PSS / private kB (smaps_rollup) read while
# the profiler still runs, samples taken. Under cost_shim.so (LD_PRELOAD)
# also the direct costs read when the workload ends, before the profiler
# stops: time in SIGPROF handlers and postponed jobs and their counts
# (the shim's), and the CPU of the profiler's own threads (schedstat)
# since 50 ms after the start (steady state: the threads' own start-up,
# like both profilers' start and stop, is not a cost per sample).
require "json"
require "tmpdir"
shim = ENV["LD_PRELOAD"].to_s.include?("cost_shim")
require "fiddle" if shim

mode = ARGV.fetch(0)
rounds = Integer(ARGV.fetch(1, "40"))
hz = Integer(ENV.fetch("BENCH_HZ", "100"))
sp_mode = ENV.fetch("BENCH_SP_MODE", "cpu").to_sym
budget = ENV["BENCH_BUDGET"]

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
when "stackprof" then StackProf.start(mode: sp_mode, interval: 1_000_000 / hz)
when "native"
  settings = {"application_name" => "bench", "output_dir" => out, "upload_interval" => 10,
              "sample_rate" => hz}
  settings["sampler_cpu_budget"] = Float(budget) if budget
  Pyroscope::Native.start(settings, {})
end

# CPU of the profiler's own threads so far (ns): ours are named pyroscope-*,
# stackprof has none.
def own_threads_ns
  Dir["/proc/self/task/*"].sum do |t|
    File.read("#{t}/comm").start_with?("pyroscope") ? File.read("#{t}/schedstat").split.first.to_i : 0
  rescue SystemCallError
    0
  end
end
if shim
  sleep 0.05 # our threads start (the drain thread is a Ruby thread: it needs the GVL)
  threads0 = own_threads_ns
end

# Two lanes: one on the main thread (the one stackprof samples: it starts
# it), one on a second thread (only pyroscope-native samples it).
lane = ->(t) { rounds.times { |i| chunk(i + t) } }
second = Thread.new { lane.call(1) }
lane.call(0)
second.join

# Memory while the profiler still holds what it collected (kB).
roll = File.read("/proc/self/smaps_rollup")
mem = %w[Rss Pss Private_Clean Private_Dirty].to_h { |k| [k, roll[/^#{k}:\s*(\d+)/, 1].to_i] }

# The profiler's direct costs so far (nanoseconds), before it stops.
extra = {}
if shim
  buf = Fiddle::Pointer.malloc(32, Fiddle::RUBY_FREE)
  Fiddle::Function.new(Fiddle::Handle::DEFAULT["pn_bench_costs"], [Fiddle::TYPE_VOIDP], Fiddle::TYPE_VOID).call(buf)
  h_ns, h_n, j_ns, j_n = buf[0, 32].unpack("Q4")
  extra = {"d_handler_ns" => h_ns, "d_signals" => h_n, "d_job_ns" => j_ns, "d_jobs" => j_n,
           "d_threads_ns" => own_threads_ns - threads0}
end
samples = case mode
          when "stackprof"
            StackProf.stop
            StackProf.results[:samples]
          when "native"
            st = Pyroscope::Native.stop
            extra.merge!(st.slice("handler_ns", "job_ns", "sampler_cpu_ns", "ticks", "timeouts", "torn", "gc_samples"))
            st["captured"]
          else 0
          end
cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu0
wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - wall0
hwm = File.read("/proc/self/status")[/VmHWM:\s*(\d+)/, 1].to_i
puts JSON.generate({mode: mode, cpu: cpu, wall: wall, hwm_kb: hwm, rss_kb: mem["Rss"], pss_kb: mem["Pss"],
                    private_kb: mem["Private_Clean"] + mem["Private_Dirty"], samples: samples}.merge(extra))
