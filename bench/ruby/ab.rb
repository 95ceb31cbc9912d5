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
# Usage: ruby bench/ruby/ab.rb rounds size NAME=GEM_HOME...   (BENCH_HZ)
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


rows = Hash.new { |h, k| h[k] = [] }
rounds.times do |r|
  builds.keys.rotate(r % builds.size).each do |name|
    home = builds[name]
    env = {"GEM_HOME" => home, "GEM_PATH" => "#{home}:#{gem_path}"}
    out, err, st = Open3.capture3(env, RbConfig.ruby, work, "native", size)
    abort "#{name} run failed: #{err}" unless st.success?
    n = JSON.parse(out.lines.last)
    s = [n["samples"], 1].max
    rows[name] << {app: 1e-3 * (n["handler_ns"] + n["job_ns"]) / s, handler: 1e-3 * n["handler_ns"] / s,
                   job: 1e-3 * n["job_ns"] / s, tick: 1e-3 * n["sampler_cpu_ns"] / [n["ticks"], 1].max,
                   sampler: 1e-3 * n["sampler_cpu_ns"] / s,
                   ticks: n["ticks"], samples: n["samples"], cpu: n["cpu"]}
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
