# frozen_string_literal: true

# Shared by the API tests: environment helpers, profiled child processes, a
# loopback ingest server (WEBrick, which Debian's libruby depends on) and a
# pprof reader that decodes with `go tool pprof -raw`, a decoder that is not
# ours.
require "minitest/autorun"
require "logger"
require "open3"
require "pathname"
require "rbconfig"
require "stringio"
require "tempfile"
require "timeout"
require "tmpdir"
require "uri"
require "webrick"
require "pyroscope"

module PyroscopeTest
  # Load path entries a child process needs for `require "pyroscope"`: the
  # folders holding the Ruby files and the compiled extension this process
  # loaded (a child also inherits GEM_HOME and RUBYLIB).
  LOAD_DIRS = $LOADED_FEATURES.filter_map do |f|
    if f.end_with?("/pyroscope.rb")
      File.dirname(f)
    elsif f =~ %r{/pyroscope/pyroscope_native\.[^/]+\z}
      File.dirname(f, 2)
    end
  end.uniq.freeze

  module_function

  # Runs the block with the environment variables set (nil: unset), then
  # puts them back.
  def with_env(vars)
    saved = vars.keys.to_h { |k| [k, ENV[k]] }
    vars.each { |k, v| v.nil? ? ENV.delete(k) : ENV[k] = v }
    yield
  ensure
    saved.each { |k, v| v.nil? ? ENV.delete(k) : ENV[k] = v }
  end

  # Every PYROSCOPE_* and OTEL_* variable unset for the block.
  def clean_env(&block)
    names = ENV.keys.select { |k| k.start_with?("PYROSCOPE_", "OTEL_") }
    with_env(names.to_h { |k| [k, nil] }, &block)
  end

  # Runs Ruby code in a new process (that has required pyroscope, unless
  # preload is false); returns [stdout, stderr, status]. Environment: this
  # one without PYROSCOPE_* and OTEL_*, plus env.
  def ruby_child(code, env: {}, timeout: 90, preload: true, args: [])
    base = ENV.keys.select { |k| k.start_with?("PYROSCOPE_", "OTEL_") }.to_h { |k| [k, nil] }
    load = LOAD_DIRS.flat_map { |d| ["-I", d] }
    load << "-rpyroscope" if preload
    out = err = status = nil
    Open3.popen3(base.merge(env), RbConfig.ruby, *load, "-e", code, "--", *args) do |i, o, e, t|
      i.close
      reader = Thread.new { e.read }
      begin
        Timeout.timeout(timeout) { out = o.read }
      rescue Timeout::Error
        Process.kill(:KILL, t.pid)
        raise "child did not finish within #{timeout} s; stderr: #{reader.value}"
      end
      err = reader.value
      status = t.value
    end
    [out, err, status]
  end

  # Profiles a child process: the code runs after a configure that sends
  # its profiles to a new folder (application app, rate Hz, no CPU budget:
  # the configured rate however loaded the machine; `settings`: more lines
  # of the configure block), and a stop. Returns [decoded profiles, the
  # child's stdout, the file names].
  def profile_child(app, code, rate: 100, settings: "", env: {})
    Dir.mktmpdir do |dir|
      setup = <<~RUBY
        Pyroscope.configure do |c|
          c.application_name = #{app.inspect}
          c.output_dir = #{dir.inspect}
          c.sample_rate = #{rate}
          c.sampler_cpu_budget = 0
          #{settings}
        end
      RUBY
      out, err, status = ruby_child("#{setup}#{code}\nPyroscope.stop\n", env: env)
      assert status.success?, err
      # (the profiles' names: stop also writes flamegraph.html there)
      [folder_profiles(dir), out, Dir.children(dir).grep(/\.pb(\.gz)?\z/).sort]
    end
  end

  # Starts the profiler in this process, writing to dir.
  def configure_to(dir, app, **settings)
    Pyroscope.configure do |c|
      c.application_name = app
      c.output_dir = dir
      settings.each { |key, value| c[key] = value }
    end
  end

  # Code for children: burns about cpu_s seconds of this thread's CPU in a
  # method with the given name (so stacks show which work ran).
  def burn_source(name)
    <<~RUBY
      def #{name}(cpu_s)
        stop = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + cpu_s
        x = 0
        x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < stop
        x
      end
    RUBY
  end

  # A pprof profile as printed by `go tool pprof -raw`.
  Sample = Struct.new(:values, :stack, :labels) # stack: function names, leaf first
  Profile = Struct.new(:period_type, :period, :sample_types, :samples)

  GO = ENV.fetch("GO", File.executable?("/usr/local/go/bin/go") ? "/usr/local/go/bin/go" : "go")

  # Decodes pprof bytes (gzip'ed or not) with go tool pprof.
  def decode_pprof(bytes)
    Tempfile.create(["profile", ".pb.gz"]) do |f|
      f.binmode
      f.write(bytes)
      f.close
      decode_pprof_file(f.path)
    end
  end

  def decode_pprof_file(path)
    out, err, status = Open3.capture3(GO, "tool", "pprof", "-raw", path)
    raise "go tool pprof -raw #{path} failed: #{err}" unless status.success?

    parse_raw(out)
  end

  def parse_raw(text)
    prof = Profile.new(nil, 0, [], [])
    locations = {}
    section = nil
    text.each_line(chomp: true) do |line|
      case line
      when /\APeriodType: (\S+) (\S+)/ then prof.period_type = [$1, $2]
      when /\APeriod: (\d+)/ then prof.period = $1.to_i
      when "Samples:" then section = :types
      when "Locations" then section = :locations
      when "Mappings" then section = :mappings
      else
        case section
        when :types
          prof.sample_types = line.split.map { |t| t.split("/") }
          section = :samples
        when :samples
          if (m = line.match(/\A\s*((?:-?\d+\s+)*-?\d+): ?(.*)\z/))
            ids = m[2].split.map(&:to_i)
            prof.samples << Sample.new(m[1].split.map(&:to_i), ids, {})
          elsif line =~ /\A\s+\S+:\[/ && prof.samples.last
            line.scan(/([A-Za-z_][\w.]*):\[([^\]]*)\]/) { |k, v| prof.samples.last.labels[k] = v }
          end
        when :locations
          # "  12: 0x0 M=1 Object#work /path/file.rb:7:0 s=0": a name may hold spaces
          m = line.match(/\A\s*(\d+): 0x\h+ (?:M=\d+ )?(?:\[F\] )?(.*) (\S*):(-?\d+):(-?\d+) s=/)
          locations[m[1].to_i] = m[2] if m
        end
      end
    end
    prof.samples.each { |s| s.stack = s.stack.map { |id| locations.fetch(id, "?") } }
    prof
  end

  # Profiles of a folder written by the folder exporter, decoded.
  def folder_profiles(dir)
    Dir.glob(File.join(dir, "*.pb.gz")).sort.map { |p| decode_pprof_file(p) }
  end

  # {labels subset => summed first value} helper: the total value of the
  # samples whose stack contains a frame matching `frame`, by the value of
  # label `key` (nil when absent).
  def value_by_label(profiles, frame, key)
    out = Hash.new(0)
    profiles.flat_map(&:samples).each do |s|
      next unless s.stack.any? { |f| f.include?(frame) }

      out[s.labels[key]] += s.values.first
    end
    out
  end

  # A Pyroscope ingest server on the loopback interface (WEBrick): records
  # each POST /ingest (query, headers, the multipart "profile" part) and
  # each OTLP POST /v1development/profiles (headers, body), and answers 200.
  class IngestServer
    Request = Struct.new(:query, :headers, :profile, :filename, :content_type, :path, :body)

    attr_reader :requests

    def initialize
      @requests = []
      @lock = Mutex.new
      @cond = ConditionVariable.new
      @server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0,
                                        Logger: WEBrick::Log.new(File::NULL),
                                        AccessLog: [])
      @server.mount_proc("/ingest") { |req, res| record(req, res) }
      @server.mount_proc("/v1development/profiles") { |req, res| record_otlp(req, res) }
      @thread = Thread.new { @server.start }
    end

    def url
      "http://127.0.0.1:#{@server.config[:Port]}"
    end

    # Waits (deadline: generous, not a timing assertion) for n requests.
    def wait_for(count, timeout: 60)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      @lock.synchronize do
        while @requests.size < count
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          raise "#{@requests.size} of #{count} ingest requests within #{timeout} s" if left <= 0

          @cond.wait(@lock, left)
        end
        @requests.dup
      end
    end

    def close
      @server.shutdown
      @thread.join
    end

    private

    def record(req, res)
      form = req.query # multipart/form-data parsed by WEBrick
      part = form["profile"]
      keep(Request.new(URI.decode_www_form(req.query_string.to_s).to_h, headers(req),
                       part&.to_s&.b, part&.filename, req.content_type, req.path), res)
    end

    def record_otlp(req, res)
      keep(Request.new({}, headers(req), nil, nil, req.content_type, req.path, req.body.to_s.b), res)
    end

    def headers(req)
      req.header.transform_values { |v| v.join(", ") }
    end

    def keep(entry, res)
      @lock.synchronize do
        @requests << entry
        @cond.broadcast
      end
      res.status = 200
      res.body = "ok"
    end
  end
end
