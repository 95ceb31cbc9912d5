# frozen_string_literal: true

# Interleaved A/B of builds of the gem: rounds of one native run of
# work.rb per build (each in a fresh process, the order rotating), and per
# build the medians over all rounds of the direct costs work.rb reports:
# per sample on the application thread (handler + recording job), the
# handler alone, the sampler thread per tick, ticks, samples and process
# CPU. A build is a GEM_HOME the gem was installed into. The handler and
# job times are estimates from the one in 16 of them the extension times
# (capture.c); builds before that timed every one, and paid two extra
# thread-CPU-clock reads per handler and per job that these figures do not
# show (count system calls with perf stat to compare those).
# Usage: ruby bench/ruby/ab.rb rounds size NAME=GEM_HOME...   (BENCH_HZ, BENCH_SHIM=1)
require "json"
require "open3"
require "rbconfig"
require_relative "median"

rounds = Integer(ARGV.fetch(0))
size = ARGV.fetch(1)
builds = ARGV.drop(2).to_h { |a| a.split("=", 2) }
abort "usage: ab.rb rounds size NAME=GEM_HOME..." if builds.empty?
work = File.join(__dir__, "work.rb")
gem_path = Gem.default_path.join(":")
# BENCH_SHIM=1: every run under cost_shim.so (as run.rb's timed runs), so the
# table also has each build's direct costs per sample measured from outside
# the extension (handler and job runs, and our threads), the same for all.
timed = {}
if ENV["BENCH_SHIM"] == "1"
  require "tmpdir"
  shim = File.join(Dir.mktmpdir("rbab"), "cost_shim.so")
  cc = RbConfig::CONFIG.fetch("CC", "cc").split.first
  system(cc, "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-o", shim,
         File.join(__dir__, "cost_shim.c"), "-ldl", exception: true)
  timed = {"LD_PRELOAD" => shim}
end


rows = Hash.new { |h, k| h[k] = [] }
rounds.times do |r|
  builds.keys.rotate(r % builds.size).each do |name|
    home = builds[name]
    env = {"GEM_HOME" => home, "GEM_PATH" => "#{home}:#{gem_path}"}.merge(timed)
    out, err, st = Open3.capture3(env, RbConfig.ruby, work, "native", size)
    abort "#{name} run failed: #{err}" unless st.success?
    n = JSON.parse(out.lines.last)
    s = [n["samples"], 1].max
    rows[name] << {app: 1e-3 * (n["handler_ns"] + n["job_ns"]) / s, handler: 1e-3 * n["handler_ns"] / s,
                   job: 1e-3 * n["job_ns"] / s, tick: 1e-3 * n["sampler_cpu_ns"] / [n["ticks"], 1].max,
                   sampler: 1e-3 * n["sampler_cpu_ns"] / s,
                   ticks: n["ticks"], samples: n["samples"], cpu: n["cpu"]}
    next unless n["d_handler_ns"]

    rows[name].last.merge!(d_app: 1e-3 * (n["d_handler_ns"] + n["d_job_ns"]) / s,
                           d_threads: 1e-3 * n["d_threads_ns"] / s,
                           d_total: 1e-3 * (n["d_handler_ns"] + n["d_job_ns"] + n["d_threads_ns"]) / s)
  end
  $stderr.print "."
end
$stderr.puts
puts "BENCH_HZ #{ENV.fetch('BENCH_HZ', '100')}, #{rounds} rounds, size #{size}, medians"
puts "| build | per sample (us) | handler (us) | job (us) | sampler per tick (us) | sampler per sample (us) | " \
     "ticks | samples | CPU (s) |"
puts "|---|---|---|---|---|---|---|---|---|"
rows.each do |name, rs|
  m = ->(k) { median(rs.map { |x| x[k] }) }
  puts format("| %s | %.2f | %.2f | %.2f | %.1f | %.2f | %d | %d | %.3f |", name, m[:app], m[:handler], m[:job],
              m[:tick], m[:sampler], m[:ticks], m[:samples], m[:cpu])
end
if rows.values.first&.first&.key?(:d_total)
  puts
  puts "Under cost_shim.so, per sample: medians [95 % intervals]"
  puts "| build | application threads (us) | own threads (us) | all direct (us) |"
  puts "|---|---|---|---|"
  rows.each do |name, rs|
    ci = ->(k) { v = rs.map { |x| x[k] }; lo, hi = median_ci(v); format("%.2f [%.2f, %.2f]", median(v), lo, hi) }
    puts format("| %s | %s | %s | %s |", name, ci[:d_app], ci[:d_threads], ci[:d_total])
  end
end
