# frozen_string_literal: true

require_relative "test_helper"

# Issue 28 §2: what the pyroscope gem took in a configure block still
# starts, with the gem's meaning (coerced, or defaulted with a warning
# naming the setting); what cannot work at all is still a ConfigError naming
# it. One row per input, citing the gem (grafana/pyroscope-rs,
# pyroscope_ffi/ruby/lib/pyroscope.rb; its Config is a Struct that checks
# no type) or its README.
class AnchorInputsTest < Minitest::Test
  include PyroscopeTest

  # [what, {key => value}, {core name => string form after resolving}, warning or nil]
  STARTS = [
    # Config's default application_name is ''; initialize_agent sent it as is
    # (the server names such a series unknown_service).
    ["empty application_name", { application_name: "" }, { "application_name" => "unknown_service" }, nil],
    # log_level: `case ... else @log_level = 50` (error): any word, Logger's "fatal" too.
    ["log_level \"fatal\"", { log_level: "fatal" }, { "log_level" => "error" }, nil],
    # sample_rate, oncpu: whatever the block assigned went on (from ENV, a String).
    ["sample_rate = \"100\"", { sample_rate: "100" }, { "sample_rate" => "100" }, nil],
    ["sample_rate = \"50\"", { sample_rate: "50" }, { "sample_rate" => "50" }, nil],
    ["oncpu = \"false\"", { oncpu: "false" }, { "oncpu" => "false" }, nil],
    ["report_pid = \"1\"", { report_pid: "1" }, { "report_pid" => "true" }, nil],
    ["max_depth = \"64\"", { max_depth: "64" }, { "max_depth" => "64" }, nil],
    # Numbers the gem took unchecked, out of our range: the nearest bound (the
    # core warns once, naming the setting).
    ["sample_rate = 0", { sample_rate: 0 }, { "sample_rate" => "100" }, nil], # no rate: the default
    ["sample_rate = 1_000_000", { sample_rate: 1_000_000 }, { "sample_rate" => "10000" }, nil],
    ["upload_interval = 0.01", { upload_interval: 0.01 }, { "upload_interval" => "0.05" }, nil],
    # server_address: any String.
    ["server_address without a scheme", { server_address: "pyroscope:4040" },
     { "server_address" => "http://pyroscope:4040" }, nil],
    # http_headers: the gem 1.x sends them to its Rust side as JSON text; a
    # String of JSON is that text.
    ["http_headers as a JSON string", { http_headers: '{"X-Scope-OrgID":"t1","X-B":"2"}' },
     { "http_headers" => "X-Scope-OrgID=t1,X-B=2" }, nil],
    # README: `config.tags = {"hostname" => ENV["HOSTNAME"]}`; tags_to_string
    # "#{k}=#{v}" with a nil value.
    ["a nil tag value (ENV[\"REGION\"] unset)", { tags: { "region" => nil, "env" => "prod" } },
     { "tags" => "env=prod" }, /tags: "region" is nil; it is left out/],
    # Every Hash setting alike (otlp_headers was left out without a word).
    ["a nil otlp_headers value", { otlp_headers: { "a" => nil, "b" => 1 } },
     { "otlp_headers" => "b=1" }, /otlp_headers: "a" is nil; it is left out/],
  ].freeze

  # Inputs that cannot work at all: still a ConfigError naming the setting.
  REFUSED = [
    ["an address that is none even with http://", { server_address: "py roscope:4040" }, /server_address/],
    ["sample_rate = \"fast\"", { sample_rate: "fast" }, /sample_rate/],
    ["oncpu = \"maybe\"", { oncpu: "maybe" }, /oncpu/],
    ["http_headers as text that is no JSON object", { http_headers: "X-A: 1" }, /http_headers: a String must be a JSON object/],
  ].freeze

  def teardown
    Pyroscope.stop
  end

  def configured(given)
    config = Pyroscope::Config.new
    config.application_name = "app"
    given.each { |k, v| config[k] = v }
    settings, env = Pyroscope::Settings.native_args(config, {})
    [Pyroscope::Native.resolve(settings, env), Pyroscope::Settings.warnings(config)]
  end

  STARTS.each_with_index do |(what, given, want, warning), i|
    define_method(:"test_starts_#{i}_#{what.gsub(/\W+/, '_')}") do
      resolved, warnings = configured(given)
      want.each { |name, value| assert_equal value, resolved[name], "#{what}: #{name}" }
      assert(warnings.any? { |w| warning.match?(w) }, warnings.inspect) if warning
    end
  end

  REFUSED.each_with_index do |(what, given, message), i|
    define_method(:"test_refused_#{i}_#{what.gsub(/\W+/, '_')}") do
      err = assert_raises(Pyroscope::ConfigError, what) { configured(given) }
      assert_match message, err.message
    end
  end

  # Through configure itself: the gem README's block, REGION unset, starts.
  def test_the_gem_readme_block_starts_with_region_unset
    Dir.mktmpdir do |dir|
      _, err = capture_io do
        Pyroscope.configure do |c|
          c.application_name = ""
          c.output_dir = dir
          c.log_level = "fatal"
          c.tags = { "region" => ENV.fetch("PYROSCOPE_TEST_UNSET_REGION", nil) }
        end
      end
      assert Pyroscope::Native.running?
      assert_match(/tags: "region" is nil; it is left out/, err)
    end
  end
end
