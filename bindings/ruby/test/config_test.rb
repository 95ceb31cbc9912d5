# frozen_string_literal: true

require_relative "test_helper"

# Pyroscope::Config: the pyroscope gem 1.1 keys and defaults, the shared
# settings, and errors that name the setting.
class ConfigTest < Minitest::Test
  include PyroscopeTest

  GEM_DEFAULTS = {
    application_name: "", app_name: nil, server_address: "http://localhost:4040",
    basic_auth_username: "", basic_auth_password: "", log_level: "warning", sample_rate: 100,
    oncpu: true, report_pid: false, report_thread_id: false, tags: {}, compression: "gzip",
    report_encoding: "pprof", autoinstrument_rails: true, tenant_id: "", http_headers: {}
  }.freeze

  def teardown
    Pyroscope.stop
  end

  def native_args(env = {})
    config = Pyroscope::Config.new
    yield config if block_given?
    Pyroscope::Settings.native_args(config, env)
  end

  def test_gem_keys_and_defaults
    config = Pyroscope::Config.new
    assert_kind_of Struct, config
    GEM_DEFAULTS.each do |key, value|
      value.nil? ? assert_nil(config[key], key) : assert_equal(value, config[key], key)
      assert_respond_to config, :"#{key}="
    end
    %i[auth_token detect_subprocesses output_dir upload_interval stop_timeout
       report_thread_name otlp_endpoint otlp_headers].each do |key|
      assert_respond_to config, :"#{key}="
    end
    refute_same Pyroscope::Config.new.tags, config.tags, "each Config has its own tags Hash"
  end

  # The Config keys are the core table's Ruby keywords (issue 27), plus the
  # gem's removed detect_subprocesses.
  def test_config_keys_are_the_core_tables
    keys = Pyroscope::Native.setting_table.flat_map { |r| r["ruby"].to_s.split("|") }.map(&:to_sym)
    assert_equal (keys + [:detect_subprocesses]).sort, Pyroscope::Config.members.sort
  end

  def test_unknown_setting_is_a_no_method_error_naming_it
    config = Pyroscope::Config.new
    err = assert_raises(NoMethodError) { config.sample_rat = 100 }
    assert_kind_of Pyroscope::UnknownSettingError, err
    assert_match(/unknown setting `sample_rat'/, err.message)
    assert_match(/did you mean sample_rate/, err.message)
    assert_equal :sample_rat=, err.name
    assert_raises(NameError) { config[:nope] = 1 }
    err = assert_raises(NoMethodError) { Pyroscope.configure { |c| c.servr_address = "x" } }
    assert_match(/servr_address/, err.message)
  end

  def test_block_settings_win_and_only_given_ones_are_passed
    settings, = native_args do |c|
      c.application_name = "my.app"
      c.sample_rate = 250
      c.tags["region"] = :eu # changed in place: given too
      c.oncpu = false
      c[:tenant_id] = "t1"
    end
    assert_equal "my.app", settings["application_name"]
    assert_equal 250, settings["sample_rate"]
    assert_equal false, settings["oncpu"]
    assert_equal "t1", settings["tenant_id"]
    refute settings.key?("report_pid"), "defaults equal to the core's are not passed"
    resolved = Pyroscope::Native.resolve(settings, {})
    assert_equal "rbspy", resolved["spy_name"]
    assert_equal RUBY_VERSION, resolved["runtime_version"]
    assert_equal "region=eu", resolved["tags"]
  end

  def test_defaults_come_from_the_core
    resolved = Pyroscope::Native.resolve(*native_args { |c| c.application_name = "a" })
    assert_equal "http://localhost:4040", resolved["server_address"]
    assert_equal "warning", resolved["log_level"]
    resolved = Pyroscope::Native.resolve(*native_args { |c| c.application_name = "a"; c.output_dir = "/tmp/x" })
    assert_equal "", resolved["server_address"], "a folder alone uploads nowhere"
    settings, env = native_args({ "PYROSCOPE_OTLP_ENDPOINT" => "http://127.0.0.1:1" }) { |c| c.application_name = "a" }
    assert_equal "", Pyroscope::Native.resolve(settings, env)["server_address"]
  end

  def test_app_name_alias_wins_as_in_the_gem
    settings, = native_args do |c|
      c.application_name = "long"
      c.app_name = "short"
    end
    assert_equal "short", settings["application_name"]
    refute settings.key?("app_name")
  end

  def test_values_converted_like_the_gem
    settings, = native_args do |c|
      c.tags = { env: :prod, build: 42 }
      c.http_headers = { "X-A" => 1 }
      c.log_level = "trace"
      c.output_dir = Pathname.new("/tmp/p")
      c.upload_interval = "500ms"
      c.stop_timeout = 2.5
      c.sample_rate = 10**30 # a Bignum: the nearest bound, as any number out of range
      c.compression = :gzip
    end
    resolved = Pyroscope::Native.resolve(settings.merge("application_name" => "a"), {})
    assert_equal "env=prod,build=42", resolved["tags"]
    assert_equal "X-A=1", resolved["http_headers"]
    assert_equal "trace", settings["log_level"]
    assert_equal "debug", resolved["log_level"]
    assert_equal %w[10000 gzip], [resolved["sample_rate"], resolved["compression"]]
    assert_equal "/tmp/p", settings["output_dir"]
    assert_equal "500ms", settings["upload_interval"]
    assert_in_delta 2.5, settings["stop_timeout"]
  end

  def test_bad_types_name_the_setting
    {
      sample_rate: [:fast, /sample_rate must be a number, not Symbol/],
      oncpu: ["maybe", /oncpu: "maybe" is not a boolean/],
      tags: [%w[a b], /tags must be a Hash, not Array/],
      application_name: [:app, /application_name must be a String, not Symbol/],
      max_depth: [1.5, /max_depth must be an Integer/],
      upload_interval: [Float::NAN, /upload_interval must be a finite number/],
      log_level: [[], /log_level must be a String/],
      server_address: ["http://a\0b", /server_address must not contain a NUL byte/],
      autoinstrument_rails: ["maybe", /autoinstrument_rails: "maybe" is not a boolean/],
      auth_token: [123, /auth_token must be a String/],
      compression: [1, /compression must be a String/],
      report_pid: [1, /report_pid must be true or false, not Integer/],
      stop_timeout: [-Float::INFINITY, /stop_timeout must be a finite number, not -Infinity/],
      http_headers: [{ "X-A" => "a\0b" }, /http_headers: "X-A" must not contain a NUL byte/]
    }.each do |key, (value, message)|
      err = assert_raises(Pyroscope::ConfigError, key.to_s) do
        Pyroscope::Native.resolve(*native_args { |c| c[key] = value }) # the core checks the type
      end
      assert_kind_of ArgumentError, err
      assert_match message, err.message
    end
  end

  # Value rules are the core's: its messages name the setting.
  def test_bad_values_rejected_by_the_core_name_the_setting
    Dir.mktmpdir do |dir|
      {
        sample_rate: ["fast", /sample_rate/], # 0 is 0.1 Hz now (anchor_inputs_test.rb)
        application_name: ["bad name!", /application_name/],
        server_address: ["ftp://x", /server_address/],
        tags: [{ "__reserved" => "x" }, /tags/],
        log_level: ["loud", /log_level/],
        upload_interval: ["soon", /upload_interval/]
      }.each do |key, (value, message)|
        err = assert_raises(Pyroscope::ConfigError, key.to_s) do
          Pyroscope.configure do |c|
            c.application_name = "cfg.test"
            c.output_dir = dir
            c[key] = value
          end
        end
        assert_match message, err.message
        refute Pyroscope.running?, "#{key}: nothing runs after a refused configure"
      end
    end
  end

  # Issue 28 §2 (anchor_inputs_test.rb): the gem sent '' and the server
  # named the series unknown_service.
  def test_missing_application_name_starts_as_unknown_service
    clean_env do
      Dir.mktmpdir do |dir|
        capture_io { Pyroscope.configure { |c| c.output_dir = dir } }
        assert Pyroscope.running?
      end
    end
  end

  def test_ruby_side_errors_keep_the_running_profiler
    Dir.mktmpdir do |dir|
      clean_env do
        configure_to(dir, "keep.running")
        assert Pyroscope.running?
        assert_raises(Pyroscope::ConfigError) { Pyroscope.configure { |c| c.sample_rate = :fast } }
        assert_raises(NoMethodError) { Pyroscope.configure { |c| c.nope = 1 } }
        assert Pyroscope.running?
        assert_equal "keep.running", Pyroscope.current_config.application_name
        assert Pyroscope.stop
        refute Pyroscope.running?
      end
    end
  end

  def test_removed_settings_warn
    _, err = capture_io do
      settings, env = native_args { |c| c.auth_token = "tok" }
      assert_equal "Authorization=Bearer tok", Pyroscope::Native.resolve(settings, env)["http_headers"]
      Pyroscope::Settings.warnings(Pyroscope::Config.new.tap { |c| c.detect_subprocesses = true })
                         .each { |w| warn w }
    end
    assert_match(/detect_subprocesses was removed/, err)
    settings, = native_args do |c|
      c.auth_token = "tok"
      c.http_headers = { "authorization" => "Basic x" }
    end
    assert_equal({ "authorization" => "Basic x" }, settings["http_headers"], "an explicit header wins")
    Dir.mktmpdir do |dir|
      _, err = capture_io { configure_to(dir, "legacy", detect_subprocesses: false) }
      assert_match(/pyroscope: detect_subprocesses was removed/, err)
    end
  end

  def test_inspect_hides_secrets
    config = Pyroscope::Config.new
    config.basic_auth_password = "s3cret"
    config.auth_token = "t0ken"
    refute_match(/s3cret|t0ken/, config.inspect)
    assert_match(/basic_auth_password="\[REDACTED\]"/, config.inspect)
  end

  # The C side keeps what a value's pn_arg points into alive and in place:
  # an anonymous class's name (a new String: it was read after the GC freed
  # it, "not @\xC4\xA6...") and a Hash's texts under compaction (a moved
  # String's old bytes: "value is not valid UTF-8"). GC.stress makes each
  # allocation a collection, so the old code fails every time.
  def test_setting_values_survive_the_gc
    msg = nil
    2.times do
      klass = Class.new(Hash)
      begin
        GC.stress = true
        Pyroscope::Native.resolve({ "sample_rate" => klass.new }, {})
      rescue Pyroscope::ConfigError => e
        msg = e.message
      ensure
        GC.stress = false
      end
      assert_match(/\Asample_rate must be a number, not #<Class:0x\h+>\z/, msg)
    end
    skip "no compaction in #{RUBY_ENGINE}" unless GC.respond_to?(:auto_compact=)

    tags = (0...12).to_h { |j| ["key#{j}", j * 1000] } # Integer values: to_s allocates
    auto = GC.auto_compact
    begin
      GC.auto_compact = true
      GC.stress = true
      got = Pyroscope::Native.resolve({ "tags" => tags }, {})["tags"]
    ensure
      GC.stress = false
      GC.auto_compact = auto
    end
    assert_equal tags.map { |k, v| "#{k}=#{v}" }.sort, got.split(",").sort
  end
end
