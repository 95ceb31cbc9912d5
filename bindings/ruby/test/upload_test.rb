# frozen_string_literal: true

require_relative "test_helper"
require "base64"
require "socket"

# Uploads to a loopback ingest server (WEBrick in this process) from a
# profiled child process, decoded with go tool pprof.
class UploadTest < Minitest::Test
  include PyroscopeTest

  def setup
    @server = IngestServer.new
  end

  def teardown
    @server.close
  end

  def test_ingest_request_and_profile
    code = burn_source("main_work") + burn_source("worker_work") + <<~RUBY
      t0 = Time.now.to_i
      Pyroscope.configure do |c|
        c.application_name = "upload.rb"
        c.server_address = #{@server.url.inspect}
        c.tags = { region: "eu", env: :ci }
        c.sample_rate = 250
        c.sampler_cpu_budget = 0 # the configured rate, however loaded the machine
        c.basic_auth_username = "alice"
        c.basic_auth_password = "s3cret pw"
        c.tenant_id = "team-7"
        c.http_headers = { "X-Extra" => "yes" }
      end
      worker = Thread.new { Pyroscope.tag_wrapper(handler: "worker") { worker_work(0.4) } }
      Pyroscope.tag_wrapper(handler: "main") { main_work(0.4) }
      worker.join
      Pyroscope.stop
      puts [t0, Time.now.to_i].join(" ")
    RUBY
    out, err, status = ruby_child(code)
    assert status.success?, err
    t0, t1 = out.split.map(&:to_i)
    requests = @server.wait_for(1)
    auth = "Basic #{Base64.strict_encode64('alice:s3cret pw')}"
    profiles = requests.map do |req|
      q = req.query
      # the user's tags and the Grafana SDKs' series tags, sorted
      assert_match(/\Aupload\.rb\{env=ci,otel\.scope\.name=pyroscope-native\/ruby,
                     otel\.scope\.version=\d+\.\d+\.\d+,process\.runtime\.name=ruby,
                     process\.runtime\.version=#{Regexp.escape(RUBY_VERSION)},region=eu\}\z/x, q["name"])
      assert_equal "rbspy", q["spyName"]
      assert_equal "250", q["sampleRate"]
      refute q.key?("format"), "with a multipart body it would break ingestion"
      assert_operator t0 - 2, :<=, q["from"].to_i
      assert_operator q["until"].to_i, :<=, t1 + 2
      assert_equal auth, req.headers["authorization"]
      assert_equal "team-7", req.headers["x-scope-orgid"]
      assert_equal "yes", req.headers["x-extra"]
      assert_match %r{\Amultipart/form-data}, req.content_type
      assert req.filename && !req.filename.empty?, "the profile part must carry a filename"
      decode_pprof(req.profile)
    end
    prof = profiles.first
    assert_equal %w[cpu nanoseconds], prof.period_type
    assert_equal 4_000_000, prof.period # 1e9 / 250 Hz
    assert_includes prof.sample_types, %w[cpu nanoseconds]
    main = value_by_label(profiles, "main_work", "handler")
    worker = value_by_label(profiles, "worker_work", "handler")
    assert_equal ["main"], main.keys, main.inspect
    assert_equal ["worker"], worker.keys, worker.inspect
    # 0.4 s of CPU each; sampling may miss some, not most.
    assert_operator main["main"], :>=, 0.15e9
    assert_operator worker["worker"], :>=, 0.15e9
  end

  # otlp_endpoint and otlp_headers reach the core: an OTLP profiles request
  # (protobuf, gzip'ed) beside the Pyroscope upload. Its content is the
  # core's (tested with the Python binding's OTLP reader).
  def test_otlp_export
    code = burn_source("otlp_work") + <<~RUBY
      Pyroscope.configure do |c|
        c.application_name = "otlp.rb"
        c.otlp_endpoint = #{@server.url.inspect}
        c.otlp_headers = { "X-Team" => "blue" }
      end
      otlp_work(0.2)
      Pyroscope.stop
    RUBY
    _, err, status = ruby_child(code)
    assert status.success?, err
    otlp = @server.wait_for(1).select { |r| r.path == "/v1development/profiles" }
    refute_empty otlp, "no OTLP request"
    assert_equal "application/x-protobuf", otlp.first.content_type
    assert_equal "blue", otlp.first.headers["x-team"]
    refute_empty otlp.first.body
    assert(@server.requests.none? { |r| r.path == "/ingest" }, "no Pyroscope upload was asked for")
  end

  # A server that is down: the failure reaches Pyroscope.logger and the
  # counters, and the process still stops (within stop_timeout) and exits.
  def test_unreachable_server_is_logged_and_does_not_hold_the_process
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    code = burn_source("work") + <<~RUBY
      require "logger"
      Pyroscope.logger = Logger.new($stdout)
      Pyroscope.configure do |c|
        c.application_name = "down.rb"
        c.server_address = "http://127.0.0.1:#{port}"
        c.stop_timeout = 1
        c.log_level = "warn"
      end
      # Until a sample is recorded: on a loaded machine 0.1 s of CPU may give
      # none, and a flush with nothing to send is true.
      give_up = Time.now + 60
      work(0.05) until Pyroscope.stats["recorded"].to_i > 0 || Time.now > give_up
      puts "FLUSHED \#{Pyroscope.flush(10)}"
      Pyroscope.stop
      puts "RUNNING \#{Pyroscope.running?} FAILED \#{Pyroscope.stats["uploads_failed"]}"
    RUBY
    out, err, status = ruby_child(code)
    assert status.success?, err
    assert_match(/^FLUSHED false$/, out)
    assert_match(/^RUNNING false FAILED [1-9]/, out)
    assert_match(/ERROR -- pyroscope: upload .*down\.rb.* failed/, out)
    # Lines drained by the sampling job (trap context) still reach the Logger.
    refute_match(/log writing failed/, err)
  end
  # Issue 28: the last upload to a server that refuses was retried with
  # backoff (0.5 + 1 + 2 s) while stop or the exit waited. It fails at once
  # now; stop_timeout (5) only bounds a transfer under way.
  def test_refused_server_does_not_hold_stop_or_exit
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    %w[stop exit].each do |ending|
      code = burn_source("work") + <<~RUBY
        t = nil
        # at_exit blocks run last-registered first: this one after Pyroscope's
        at_exit { puts "TOOK \#{Process.clock_gettime(Process::CLOCK_MONOTONIC) - t}" if t }
        Pyroscope.configure do |c|
          c.application_name = "refused.rb"
          c.server_address = "http://127.0.0.1:#{port}"
          c.stop_timeout = 5
          c.upload_interval = 60
        end
        work(0.2)
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        if "#{ending}" == "stop"
          Pyroscope.stop
          took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
          puts "TOOK \#{took} FAILED \#{Pyroscope.stats["uploads_failed"]}"
          t = nil
        end
      RUBY
      out, err, status = ruby_child(code)
      assert status.success?, err
      took = out[/^TOOK ([\d.e-]+)/, 1]
      refute_nil took, out + err
      assert_operator took.to_f, :<, 1.0, "#{ending}: #{out}#{err}"
      assert_match(/FAILED [1-9]/, out) if ending == "stop"
    end
  end
end
