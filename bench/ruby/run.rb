# frozen_string_literal: true

# pyroscope-native against stackprof at the same rate, side by side:
# rounds of (base, stackprof, native) runs in a rotating order, each in a
# fresh process; per round the profiled run is compared with that round's
# base run, and the report gives the median over all rounds of:
#   own CPU      profiled process CPU - base process CPU (s, and % of base)
#   CPU ratio    profiled / base process CPU
#   RSS added    peak RSS - base peak RSS (MB)
#   per sample   own CPU / samples taken (us)
# and the direct costs, which the noise of a loaded machine does not hide:
# ours per sample (time in the signal handler + the recording job) and our
# sampler thread per tick; stackprof's StackProf.sample at the same depth
# (what its handler + postponed job do per sample, minus signal delivery).
# Usage: ruby bench/ruby/run.rb [rounds] [work size]   (BENCH_HZ, default 100)
require "json"
require "open3"
require "rbconfig"
require_relative "median"

rounds = Integer(ARGV.fetch(0, "9"))
size = ARGV.fetch(1, "600")
work = File.join(__dir__, "work.rb")
modes = %w[base stackprof native]


results = Hash.new { |h, k| h[k] = [] }
rounds.times do |r|
  order = modes.rotate(r % modes.size)
  row = {}
  order.each do |m|
    out, err, st = Open3.capture3(RbConfig.ruby, work, m, size)
    abort "#{m} run failed: #{err}" unless st.success?
    row[m] = JSON.parse(out.lines.last)
  end
  %w[stackprof native].each do |m|
    base, prof = row["base"], row[m]
    own = prof["cpu"] - base["cpu"]
    results[m] << {own: own, own_pct: 100.0 * own / base["cpu"], ratio: prof["cpu"] / base["cpu"],
                   rss_mb: (prof["hwm_kb"] - base["hwm_kb"]) / 1024.0, samples: prof["samples"],
                   per_sample_us: prof["samples"].positive? ? 1e6 * own / prof["samples"] : nil,
                   base_cpu: base["cpu"]}
  end
  n = row["native"]
  results["direct"] << {app_us: 1e-3 * (n["handler_ns"] + n["job_ns"]) / [n["samples"], 1].max,
                        handler_us: 1e-3 * n["handler_ns"] / [n["samples"], 1].max,
                        sampler_us: 1e-3 * n["sampler_cpu_ns"] / [n["ticks"], 1].max,
                        timeouts: n["timeouts"], torn: n["torn"], gc: n["gc_samples"]}
  $stderr.puts format("round %d/%d: base %.2fs cpu; stackprof %+.3fs (%d samples); native %+.3fs (%d samples)",
                      r + 1, rounds, row["base"]["cpu"], results["stackprof"].last[:own],
                      row["stackprof"]["samples"], results["native"].last[:own], row["native"]["samples"])
end

# StackProf.sample at a depth like the workload's (about 12 frames).
sp_code = <<~'RUBY'
  require "stackprof"
  def nest(n, &b) = n.zero? ? b.call : nest(n - 1, &b)
  StackProf.start(mode: :cpu, interval: 999_999, raw: true)
  best = nest(10) do
    5.times.map do
      t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
      20_000.times { StackProf.sample }
      (Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) - t) / 20_000 * 1e6
    end.sort[2]
  end
  StackProf.stop
  puts best
RUBY
sp_out, _sp_err, sp_st = Open3.capture3(RbConfig.ruby, "-e", sp_code)
sp_sample_us = sp_st.success? ? Float(sp_out.lines.last) : nil

hz = ENV.fetch("BENCH_HZ", "100")
load = File.read("/proc/loadavg").split.first(3).join(" ")
puts "Ruby #{RUBY_VERSION}, #{hz} Hz, #{rounds} rounds (base/stackprof/native rotating), work size #{size}, " \
     "load average at the end #{load}"
puts "| profiler | base CPU (s) | own CPU (s) | own CPU (% of base) | total CPU ratio | RSS added (MB) | samples | per-sample cost (us) |"
puts "|---|---|---|---|---|---|---|---|"
%w[stackprof native].each do |m|
  rs = results[m]
  per = rs.map { |x| x[:per_sample_us] }.compact
  puts format("| %s | %.2f | %.3f | %.1f%% | %.3f | %.1f | %d | %s |",
              m == "native" ? "pyroscope-native" : "stackprof #{Gem.loaded_specs["stackprof"]&.version || "(Debian)"}",
              median(rs.map { |x| x[:base_cpu] }), median(rs.map { |x| x[:own] }),
              median(rs.map { |x| x[:own_pct] }), median(rs.map { |x| x[:ratio] }),
              median(rs.map { |x| x[:rss_mb] }), median(rs.map { |x| x[:samples] }),
              per.empty? ? "-" : format("%.1f", median(per)))
end
d = results["direct"]
puts
puts "Direct costs (medians of the rounds):"
puts format("- pyroscope-native, per sample on the application thread (handler + recording job): %.1f us " \
            "(handler alone %.1f us)", median(d.map { |x| x[:app_us] }), median(d.map { |x| x[:handler_us] }))
puts format("- pyroscope-native, sampler thread per tick: %.1f us; per run: timeouts %d, torn captures %d, " \
            "samples in a GC step %d", median(d.map { |x| x[:sampler_us] }), median(d.map { |x| x[:timeouts] }),
            median(d.map { |x| x[:torn] }), median(d.map { |x| x[:gc] }))
puts(sp_sample_us ? format("- stackprof, one StackProf.sample at depth ~12: %.2f us", sp_sample_us) :
                    "- stackprof sample cost: not measured (StackProf.sample failed)")
