# frozen_string_literal: true

require_relative "native_helper"
require "json"
require "open3"
require "zlib"

# Upload to a real loopback ingest server (the Python tests' IngestServer,
# run by native_ingest_server.py): the request the Pyroscope server expects,
# and a profile go tool pprof decodes with our stacks and labels.
class NativeUploadTest < Minitest::Test
  include NativeHelper
  N = Pyroscope::Native

  def uploaded_work(s) = burn(s)

  def test_upload_to_loopback_ingest_server
    Dir.mktmpdir do |dir|
      server = IO.popen(["python3", File.join(__dir__, "native_ingest_server.py"), dir], "r+")
      url = server.gets&.strip
      refute_nil url, "the ingest server did not start"
      # No CPU budget: on a loaded machine it may space ticks out, and the
      # sampleRate sent is then the rate the ticks really had.
      N.start({"application_name" => "rb.upload", "server_address" => url,
                "upload_interval" => 60, "tags" => {"region" => "eu", "otel.scope.version" => "pinned"},
                "sampler_cpu_budget" => 0,
                "basic_auth_username" => "u", "basic_auth_password" => "p"}, {})
      N.labels_push({"endpoint" => "/work"})
      uploaded_work(0.4)
      N.labels_restore(nil)
      stats = N.stop
      server.close_write
      server.read
      server.close
      assert_equal 1, stats["uploads_ok"], stats.inspect
      meta = JSON.parse(File.read(File.join(dir, "0.json")))
      assert_equal "/ingest", meta["path"]
      assert_match(/\Arb\.upload(\.cpu)?\{.*region=eu/, meta["query"]["name"])
      assert_equal "rbspy", meta["query"]["spyName"]
      # The series tags the Grafana SDKs add to every upload; a user's tag of
      # the same name wins.
      tags = meta["query"]["name"][/\{(.*)\}/, 1].split(",").to_h { |kv| kv.split("=", 2) }
      assert_equal({"otel.scope.name" => "pyroscope-native/ruby", "otel.scope.version" => "pinned",
                    "process.runtime.name" => "ruby", "process.runtime.version" => RUBY_VERSION},
                   tags.slice("otel.scope.name", "otel.scope.version", "process.runtime.name",
                              "process.runtime.version"))
      assert_equal "100", meta["query"]["sampleRate"]
      assert_match(/\ABasic /, meta["headers"]["authorization"])
      raw = File.binread(File.join(dir, "0.profile"))
      raw = Zlib.gunzip(raw) if raw.start_with?("\x1f\x8b".b)
      File.binwrite(File.join(dir, "p.pb"), raw)
      samples = decode(File.join(dir, "p.pb"))
      # File names as the pyroscope gem made them (the rule: test_source_path_like_the_gem),
      # not absolute. (Run as `ruby bindings/ruby/test/...`, this file's path holds
      # "/ruby/", which the gem's stdlib rule cuts after: "native_upload_test.rb".)
      raw_text, = Open3.capture2("go", "tool", "pprof", "-raw", File.join(dir, "p.pb"))
      files = raw_text.scan(/\S*uploaded_work (\S+):\d+:\d+ s=/).flatten.uniq
      assert_equal [N.source_path(__FILE__)], files
      refute files.first.start_with?("/"), files.inspect
      mine = samples.select { |s| s.stack.any? { |f| f.include?("uploaded_work") } }
      assert_operator mine.sum(&:count), :>=, 10, stats.inspect
      assert(mine.all? { |s| s.labels["endpoint"] == "/work" }, mine.map(&:labels).uniq.inspect)
    end
  end

  # The pyroscope gem's rule (pyroscope-rs transform_report), checked on
  # paths: under the working directory, installed gems, the standard
  # library, anything else as given.
  def test_source_path_like_the_gem
    cwd = Dir.pwd
    assert_equal "app/models/user.rb", N.source_path("#{cwd}/app/models/user.rb")
    assert_equal "gems/rack-3.0.8/lib/rack/builder.rb",
                 N.source_path("/usr/local/bundle/gems/rack-3.0.8/lib/rack/builder.rb")
    assert_equal "vendor/bundle/ruby/3.1.0/gems/rack-3.0.8/lib/rack.rb",
                 N.source_path("#{cwd}/vendor/bundle/ruby/3.1.0/gems/rack-3.0.8/lib/rack.rb")
    assert_equal "set.rb", N.source_path("/usr/lib/ruby/3.1.0/set.rb")
    assert_equal "x_test.rb", N.source_path("bindings/ruby/test/x_test.rb") # the gem's rule, quirk included
    assert_equal "<internal:kernel>", N.source_path("<internal:kernel>")
    assert_equal "/opt/other/x.rb", N.source_path("/opt/other/x.rb")
    # the working directory counts only as a whole folder name
    assert_equal "#{cwd}extra/x.rb", N.source_path("#{cwd}extra/x.rb") unless cwd.match?(%r{/(ruby|gems)/})
  end

  def test_config_errors_name_the_setting
    e = assert_raises(Pyroscope::ConfigError) { N.start({"sample_rat" => 100}, {}) }
    assert_match(/sample_rat/, e.message)
    e = assert_raises(Pyroscope::ConfigError) do
      N.start({"application_name" => "a", "output_dir" => "/tmp", "upload_interval" => "soon"}, {})
    end
    assert_match(/upload_interval/, e.message)
    e = assert_raises(Pyroscope::ConfigError) do
      N.start({"application_name" => "a", "output_dir" => "/tmp", "tags" => {"__x" => "1"}}, {})
    end
    assert_match(/__x/, e.message)
    e = assert_raises(Pyroscope::ConfigError) do
      N.start({"application_name" => "a", "output_dir" => "/tmp", "oncpu" => Object.new}, {})
    end
    assert_match(/oncpu/, e.message)
    # The environment comes first; a keyword wins over it.
    e = assert_raises(Pyroscope::ConfigError) do
      N.start({"application_name" => "a", "output_dir" => "/tmp"}, {"PYROSCOPE_SAMPLE_RATE" => "fast"})
    end
    assert_match(/sample_rate/i, e.message)
    Dir.mktmpdir do |dir|
      N.start({"application_name" => "kw", "output_dir" => dir},
              {"PYROSCOPE_APPLICATION_NAME" => "envapp", "PYROSCOPE_UPLOAD_INTERVAL" => "60"})
      assert N.running?
      assert_raises(Pyroscope::Native::Error) { N.start({"application_name" => "a", "output_dir" => dir}, {}) }
      # until a sample is recorded (a loaded machine may give 50 ms of CPU none)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
      burn(0.05) while N.stats["recorded"].to_i.zero? &&
                       Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      N.stop
      names = Dir.children(dir)
      refute_empty names
      assert(names.all? { |f| f.start_with?("kw") }, names.inspect)
    end
    refute N.running?
    assert_nil N.stop
    assert_includes N.setting_table.map { |r| r["name"] }, "server_address"
    assert_equal File.read("/proc/thread-self/stat").split.first.to_i, N.thread_id
  end
end
