# frozen_string_literal: true

# The memory profile's cost on allocation-heavy Ruby, side by side.
#
#   ruby bench/ruby/alloc_cost.rb [rounds] [size]
#
# Each round runs every variant once, each in a fresh process, in an order
# that rotates from round to round, on two workloads: many small objects
# (arrays, strings, hashes made and dropped) and a JSON encode/decode loop.
# A run reports the CPU time of its workload alone (process CPU around it,
# after the profiler started). The report gives per variant the median
# over rounds, and the ratio to `cpu` as the median of each round's own
# ratio (the machine's load, which changes between rounds, cancels within
# a round): the memory profile's own cost is `cpu+memory` / `cpu`.
#
#   none         no profiler
#   cpu          pyroscope-native, CPU profile at 100 Hz, memory off (default)
#   cpu+memory   the same with memory: true at the default 512 KiB interval
#   cpu+memory/32  at a 16 KiB interval: 32 times the samples, so the
#                cost of one sampling window shows above the machine's noise
#                ((ratio - 1) / 32 is the default's share of it)
require "json"
require "open3"
require "rbconfig"
require "tmpdir"
require_relative "median"

CHILD = <<~'RUBY'
  require "json"
  require "tmpdir"
  variant, workload, size = ARGV[0], ARGV[1], Integer(ARGV[2])
  if variant != "none"
    require "pyroscope/pyroscope_native"
    Pyroscope::Native.start({"application_name" => "bench.alloc", "output_dir" => Dir.mktmpdir,
                             "upload_interval" => 10, "sample_rate" => 100,
                             "memory" => variant.start_with?("cpu+memory"),
                             "memory_interval" => variant.end_with?("/32") ? 16384 : 524288}, {})
  end
  def small_objects(n)
    keep = []
    n.times do |i|
      a = [i, i + 1, i.to_s]
      h = {a: a, b: "x#{i}"}
      keep << h if i % 64 == 0
      keep.clear if keep.size > 1000
    end
    keep.size
  end
  DOC = {"users" => Array.new(20) { |i| {"id" => i, "name" => "user#{i}", "tags" => %w[a b c], "score" => i * 1.5} }}
  def json_loop(n) = n.times.sum { JSON.parse(JSON.generate(DOC)).size }
  t = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  workload == "small" ? small_objects(size * 1000) : json_loop(size * 10)
  cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t
  st = variant == "none" ? {} : Pyroscope::Native.stop
  puts JSON.generate({cpu: cpu, sampled: st["memory_sampled"].to_i})
RUBY

rounds = Integer(ARGV.fetch(0, "11"))
size = Integer(ARGV.fetch(1, "600"))
variants = ["none", "cpu", "cpu+memory", "cpu+memory/32"]
workloads = {"small" => "many small objects", "json" => "JSON encode/decode"}
script = File.join(Dir.mktmpdir("rballoc"), "child.rb")
File.write(script, CHILD)

cpu = Hash.new { |h, k| h[k] = [] }
ratio = Hash.new { |h, k| h[k] = [] }
sampled = Hash.new { |h, k| h[k] = [] }
rounds.times do |r|
  workloads.each_key do |w|
    row = {}
    variants.rotate(r % variants.size).each do |v|
      out, err, st = Open3.capture3(RbConfig.ruby, script, v, w, size.to_s)
      abort "#{v} #{w} failed: #{err}" unless st.success?
      row[v] = JSON.parse(out.lines.last)
    end
    variants.each do |v|
      cpu[[w, v]] << row[v]["cpu"]
      ratio[[w, v]] << row[v]["cpu"] / row["cpu"]["cpu"]
      sampled[[w, v]] << row[v]["sampled"]
    end
  end
  $stderr.print "."
end
$stderr.puts
load = File.read("/proc/loadavg").split.first(3).join(" ")
puts "Ruby #{RUBY_VERSION}, #{rounds} rounds, size #{size}, load average at the end #{load}; medians of the rounds"
puts "| workload | variant | workload CPU (s) | ratio to cpu (median of rounds) [95 %] | samples |"
puts "|---|---|---|---|---|"
workloads.each do |w, title|
  variants.each do |v|
    lo, hi = median_ci(ratio[[w, v]])
    puts format("| %s | %s | %.3f | %.3f [%.3f, %.3f] | %d |", title, v, median(cpu[[w, v]]),
                median(ratio[[w, v]]), lo, hi, median(sampled[[w, v]]))
  end
end
