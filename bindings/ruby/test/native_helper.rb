# frozen_string_literal: true

# Shared by the native_*_test.rb files: the extension, a pprof decoder
# (`go tool pprof -raw`, independent of our encoder), CPU burners and a
# runner for scripts that must live in a process of their own.
require "minitest/autorun"
require "open3"
require "rbconfig"
require "tmpdir"
require "pyroscope/pyroscope_native"
require "pyroscope/fork"
require "pyroscope/ractor_guard"

module NativeHelper
  Sample = Struct.new(:cpu, :count, :stack, :labels) # stack: names, leaf first

  module_function

  def thread_cpu
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  end

  # Burn `seconds` of this thread's CPU in pure Ruby (frames stay put).
  def burn(seconds)
    stop = thread_cpu + seconds
    x = 0
    while thread_cpu < stop
      2000.times { x += 1 }
    end
    x
  end

  # Every sample of every profile (.pb.gz / .profile) in dir.
  def decode_dir(dir, pattern = "*.pb.gz")
    Dir[File.join(dir, pattern)].sort.flat_map { |f| decode(f) }
  end

  def decode(file)
    out, err, st = Open3.capture3("go", "tool", "pprof", "-raw", file)
    raise "go tool pprof -raw #{file} failed: #{err}" unless st.success?
    parse_raw(out)
  end

  def parse_raw(text)
    samples = []
    locs = {}
    section = nil
    text.each_line do |line|
      case line
      when /^Samples:/ then section = :samples
      when /^Locations/ then section = :locations
      when /^Mappings/ then section = :mappings
      else
        if section == :samples && line =~ /^\s*(-?\d+)\s+(-?\d+):\s*([\d ]*)$/
          samples << Sample.new($1.to_i, $2.to_i, $3.split.map(&:to_i), {})
        elsif section == :samples && line =~ /^\s+\S+:\[/ && samples.any?
          line.scan(/(\S+?):\[([^\]]*)\]/) { |k, v| samples.last.labels[k] = v }
        elsif section == :locations && line =~ /^\s*(\d+): 0x\h+ M=\d+ (.*) (\S*):(\d+):\d+ s=/
          locs[$1.to_i] = $2
        end
      end
    end
    samples.each { |s| s.stack = s.stack.map { |id| locs.fetch(id, "?") } }
    samples
  end

  # The first lines of every child script: this helper, N, a temporary
  # folder in `dir`.
  CHILD_PRELUDE = <<~'RUBY'
    require "native_helper"
    require "tmpdir"
    include NativeHelper
    N = Pyroscope::Native
    dir = Dir.mktmpdir
  RUBY

  # Run a Ruby script (after CHILD_PRELUDE) in its own process with this
  # gem; [stdout+stderr, status].
  def run_ruby(code, env: {})
    Dir.mktmpdir do |dir|
      path = File.join(dir, "script.rb")
      File.write(path, CHILD_PRELUDE + code)
      out, st = Open3.capture2e(env, RbConfig.ruby, "-I", __dir__, path)
      [out, st]
    end
  end

  # In a child script: start, printing STARTED or REFUSED <why>.
  def try_start(dir)
    Pyroscope::Native.start(settings(dir), {})
    puts "STARTED"
  rescue Pyroscope::Native::Error => e
    puts "REFUSED #{e.message}"
  end

  def settings(dir, **more)
    {"application_name" => "rbtest", "output_dir" => dir, "upload_interval" => 60,
     "sample_rate" => 100}.merge(more.transform_keys(&:to_s))
  end

  def charged(samples, name)
    samples.select { |s| s.stack.any? { |f| f.include?(name) } }.sum(&:cpu)
  end
end
