# frozen_string_literal: true

require_relative "test_helper"

# PYROSCOPE_* variables: every setting can come from one; a setting given in
# the configure block wins (its variable is not even read).
class EnvTest < Minitest::Test
  include PyroscopeTest

  def teardown
    Pyroscope.stop
  end

  def native_args(env)
    config = Pyroscope::Config.new
    yield config if block_given?
    Pyroscope::Settings.native_args(config, env)
  end

  def test_core_variables_go_to_the_core_unless_a_setting_wins
    env = { "PYROSCOPE_SAMPLE_RATE" => "50", "PYROSCOPE_UPLOAD_INTERVAL" => "2s",
            "PYROSCOPE_APPLICATION_NAME" => "from.env", "OTEL_SERVICE_NAME" => "svc",
            "HOME" => "/root", "PYROSCOPE_AUTOINSTRUMENT_RAILS" => "false" }
    settings, core_env = native_args(env) { |c| c.sample_rate = 7 }
    assert_equal 7, settings["sample_rate"]
    refute core_env.key?("HOME")
    resolved = Pyroscope::Native.resolve(settings, core_env) # the core's precedence
    assert_equal "7", resolved["sample_rate"], "a setting given wins over its variable"
    assert_equal "2", resolved["upload_interval"]
    assert_equal "from.env", resolved["application_name"], "PYROSCOPE_* beats OTEL_*"
  end

  # Issue 28: the names Grafana's examples use start the profiler (the core
  # reads them: PYROSCOPE_BASIC_AUTH_USER is the user, PYROSCOPE_AUTH_TOKEN a
  # Bearer token), and are not reported as unknown.
  def test_anchor_auth_variables_start
    log = StringIO.new
    Pyroscope.logger = Logger.new(log)
    clean_env do
      with_env("PYROSCOPE_BASIC_AUTH_USER" => "alice", "PYROSCOPE_BASIC_AUTH_PASSWORD" => "pw",
               "PYROSCOPE_AUTH_TOKEN" => "tok", "PYROSCOPE_LOG_LEVEL" => "warn") do
        Dir.mktmpdir do |dir|
          configure_to(dir, "env.auth")
          assert Pyroscope.running?
          Pyroscope.stop
        end
      end
    end
    refute_match(/unknown environment variable/, log.string)
  ensure
    Pyroscope.logger = nil
  end

  def test_variables_replace_the_gem_defaults
    env = { "PYROSCOPE_APPLICATION_NAME" => "a", "PYROSCOPE_LOG_LEVEL" => "info", "PYROSCOPE_OUTPUT_DIR" => "/tmp/o" }
    resolved = Pyroscope::Native.resolve(*native_args(env))
    assert_equal "info", resolved["log_level"]
    assert_equal "", resolved["server_address"], "a destination from the environment: no default server"
    env = { "PYROSCOPE_APPLICATION_NAME" => "a", "PYROSCOPE_SERVER_ADDRESS" => "  " }
    assert_equal "http://localhost:4040", Pyroscope::Native.resolve(*native_args(env))["server_address"],
                 "blank means unset"
  end

  # This binding's own settings are resolved by the core too.
  def test_boolean_variable_resolved_by_the_core
    assert_equal "false", resolve({ "PYROSCOPE_AUTOINSTRUMENT_RAILS" => "Off" })["autoinstrument_rails"]
    assert_equal "true", resolve({})["autoinstrument_rails"]
    err = assert_raises(Pyroscope::ConfigError) { resolve({ "PYROSCOPE_AUTOINSTRUMENT_RAILS" => "maybe" }) }
    assert_match(/PYROSCOPE_AUTOINSTRUMENT_RAILS: autoinstrument_rails: "maybe" is not a boolean/, err.message)
  end

  def resolve(env)
    Pyroscope::Native.resolve(*Pyroscope::Settings.native_args(Pyroscope::Config.new, env))
  end

  # The core reads the variables: a bad one is named in the error.
  def test_bad_variable_is_named
    Dir.mktmpdir do |dir|
      clean_env do
        with_env("PYROSCOPE_SAMPLE_RATE" => "lots", "PYROSCOPE_OUTPUT_DIR" => dir,
                 "PYROSCOPE_APPLICATION_NAME" => "env.test") do
          err = assert_raises(Pyroscope::ConfigError) { Pyroscope.configure }
          assert_match(/PYROSCOPE_SAMPLE_RATE/, err.message)
          Pyroscope.configure { |c| c.sample_rate = 100 } # the setting wins: not even parsed
          assert Pyroscope.running?
        end
      end
    end
  end

  def test_autoinstrument_rails_from_the_environment
    Dir.mktmpdir do |dir|
      clean_env do
        with_env("PYROSCOPE_AUTOINSTRUMENT_RAILS" => "no") do
          configure_to(dir, "env.rails")
          assert_equal false, Pyroscope.current_config.autoinstrument_rails
          configure_to(dir, "env.rails", autoinstrument_rails: true)
          assert_equal true, Pyroscope.current_config.autoinstrument_rails, "the setting wins"
        end
      end
    end
  end

  # Configured by the environment alone: a child writes its profile to the
  # folder of PYROSCOPE_OUTPUT_DIR, named after PYROSCOPE_APPLICATION_NAME,
  # with PYROSCOPE_TAGS on its samples.
  def test_environment_alone_configures_a_process
    Dir.mktmpdir do |dir|
      env = { "PYROSCOPE_APPLICATION_NAME" => "env.only", "PYROSCOPE_OUTPUT_DIR" => dir,
              "PYROSCOPE_TAGS" => "origin=env", "PYROSCOPE_SAMPLE_RATE" => "200",
              "PYROSCOPE_SAMPLER_CPU_BUDGET" => "0" }
      code = burn_source("env_work") + <<~RUBY
        Pyroscope.configure
        env_work(0.3)
        Pyroscope.stop
      RUBY
      _, err, status = ruby_child(code, env: env)
      assert status.success?, err
      files = Dir.children(dir)
      assert files.any? { |f| f.start_with?("env.only-cpu-") }, files.inspect
      profiles = folder_profiles(dir)
      assert_equal 200, 1_000_000_000 / profiles.first.period
      by_origin = value_by_label(profiles, "env_work", "origin")
      assert_operator by_origin["env"], :>, 0, by_origin.inspect
      assert_equal ["env"], by_origin.keys
    end
  end
end
