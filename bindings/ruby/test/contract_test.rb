# frozen_string_literal: true

require_relative "test_helper"
require "json"

# Issue 27: one contract in the core. Walks the core's settings table
# (Native.setting_table) with the cases every binding shares
# (tests/contract/settings_cases.json): each setting by keyword and by
# variable, the precedence rule, a bad value naming the setting, and the
# drift items settled the same way in all three suites.
class ContractTest < Minitest::Test
  include PyroscopeTest

  CASES = JSON.parse(File.read(File.expand_path("../../../tests/contract/settings_cases.json", __dir__)))
  ROWS = Pyroscope::Native.setting_table.select { |r| r["ruby"] && !r["external"] }

  def teardown
    Pyroscope.stop
  end

  # The settings start would run with ({name => String}).
  def resolved(env = {}, **given)
    config = Pyroscope::Config.new
    given.each { |k, v| config[k] = v }
    settings, core_env = Pyroscope::Settings.native_args(config, env)
    Pyroscope::Native.resolve(settings, core_env)
  end

  def case_of(row)
    CASES["by_name"][row["name"]] || CASES["by_kind"][row["kind"]]
  end

  def key_of(row)
    row["ruby"].split("|").first.to_sym
  end

  def value_of(row, text)
    case row["kind"]
    when "bool" then Pyroscope::Native.parse_bool("x", text)
    when "number", "integer" then Integer(text)
    when "pairs" then text.split(",").to_h { |p| p.split("=", 2) }
    else text
    end
  end

  def base(row)
    out = row["name"] == "application_name" ? {} : { application_name: "app" }
    CASES["need"].fetch(row["name"], {}).each { |k, v| out[k.to_sym] = v }
    out
  end

  def test_every_setting_by_keyword_and_by_variable
    assert_operator ROWS.size, :>, 15
    ROWS.each do |row|
      text, want = case_of(row)
      assert_equal want, resolved(**base(row), key_of(row) => value_of(row, text))[row["name"]], row["name"]
      assert_equal want, resolved({ row["env"] => text }, **base(row))[row["name"]], row["env"]
    end
  end

  def test_keyword_beats_variable_beats_otel_beats_default
    ROWS.each do |row|
      text, want = case_of(row)
      bad = { row["env"] => CASES["bad_variable"][row["kind"]] }
      assert_equal want, resolved(bad, **base(row), key_of(row) => value_of(row, text))[row["name"]],
                   "#{row['name']}: a bad variable beside its keyword is not read"
      if row["default"] && row["name"] != "server_address"
        assert_equal row["default"], resolved(**base(row))[row["name"]], "#{row['name']} default"
      end
      row["otel_env"].to_s.split(",").each do |otel|
        other = CASES["otel_value"][row["name"]]
        assert_equal other, resolved({ otel => other }, **base(row))[row["name"]], otel
        assert_equal want, resolved({ otel => other, row["env"] => text }, **base(row))[row["name"]], otel
      end
    end
  end

  def test_a_bad_value_names_the_setting
    ROWS.each do |row|
      bad = CASES["bad_variable"][row["kind"]]
      err = assert_raises(Pyroscope::ConfigError, row["env"]) { resolved({ row["env"] => bad }, **base(row)) }
      assert_includes err.message, "environment variable #{row['env']}"
      assert_includes err.message, row["name"]
      value = { "number" => CASES["bad_keyword_number"], "integer" => CASES["bad_keyword_number"],
                "bool" => "maybe", "pairs" => "k" }.fetch(row["kind"], bad)
      err = assert_raises(Pyroscope::ConfigError, row["name"]) { resolved(**base(row), key_of(row) => value) }
      assert_includes err.message, row["name"]
    end
  end

  # --- the drift items of issue 27

  def test_defaults_are_the_cores
    got = resolved(application_name: "app")
    CASES["defaults"].each { |name, want| assert_equal want, got[name], name }
    assert_equal "rbspy", got["spy_name"]
    assert_equal "warning", Pyroscope::Config.new.log_level, "was the gem's error"
  end

  # The anchors' other spellings, an auth token beside basic auth, a full
  # variable name beside its alias (settings_cases.json env_cases).
  def test_variables_alone
    CASES["env_cases"].each do |env, want|
      got = resolved(env, application_name: "app")
      want.each { |name, value| assert_equal value, got[name], "#{env} #{name}" }
    end
    CASES["env_refused"].each do |env|
      err = assert_raises(Pyroscope::ConfigError) { resolved(env, application_name: "app") }
      assert_match(/are the same setting/, err.message)
    end
  end

  def test_an_otlp_endpoint_alone_means_no_default_server
    %w[OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT].each do |var|
      got = resolved({ var => "http://collector:4318" }, application_name: "app")
      assert_equal ["", "http://collector:4318"], [got["server_address"], got["otlp_endpoint"]], var
    end
  end

  def test_spy_name_variable_is_honoured
    assert_equal "custom", resolved({ "PYROSCOPE_SPY_NAME" => "custom" }, application_name: "app")["spy_name"]
  end

  def test_adhoc_server_address_is_below_the_keyword
    env = { "PYROSCOPE_ADHOC_SERVER_ADDRESS" => "http://adhoc:1" }
    assert_equal "http://adhoc:1", resolved(env, application_name: "app")["server_address"]
    assert_equal "http://kw:1", resolved(env, application_name: "app", server_address: "http://kw:1")["server_address"]
  end

  def test_durations_take_units
    got = resolved(application_name: "app", upload_interval: "1m", stop_timeout: "500ms")
    assert_equal %w[60 0.5], [got["upload_interval"], got["stop_timeout"]]
  end

  def test_an_unknown_variable_is_warned_about_once_per_process
    name = "PYROSCOPE_NO_SUCH_#{Process.pid}_#{rand(1 << 30)}"
    log = StringIO.new
    Pyroscope.logger = Logger.new(log)
    with_env(name => "1") do
      Dir.mktmpdir do |dir|
        2.times do
          configure_to(dir, "contract.once")
          Pyroscope.stop
        end
      end
    end
    Pyroscope::LogRelay.drain
    assert_equal 1, log.string.scan(name).size, log.string
  ensure
    Pyroscope.logger = nil
  end

  # stats is built from the core's counter table (each binding had its own subset).
  def test_stats_has_every_counter_of_the_cores_table
    table = Pyroscope::Native.stats_table
    assert_operator table.size, :>, 15
    Dir.mktmpdir do |dir|
      configure_to(dir, "contract.stats")
      got = Pyroscope.stats
      assert_equal [], table.map(&:first).reject { |n| got.key?(n) }
    end
  end
end
