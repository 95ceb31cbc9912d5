# frozen_string_literal: true

module Pyroscope
  # A bad setting or label; the message names it. The C extension defines
  # it too (same superclass), whichever of the two loads first.
  ConfigError = Class.new(ArgumentError) unless const_defined?(:ConfigError)

  # `c.no_such_setting = 1` in a configure block. The pyroscope gem's Config
  # is a Struct, so this was a NoMethodError there too; this one says that
  # the name is not a setting and lists the ones that are.
  class UnknownSettingError < NoMethodError; end

  # Every setting of Pyroscope.configure: its kind and its default.
  #   gem:    the pyroscope gem 1.1 Config, with that gem's defaults
  #   legacy: removed from the pyroscope gem in 1.0; accepted with a warning
  #   shared: the settings all pyroscope-native bindings share; unset means
  #           the core's default (README / docs/ruby.md)
  module Settings
    GEM = {
      application_name: [:string, ""],
      app_name: [:string, nil],
      server_address: [:string, "http://localhost:4040"],
      basic_auth_username: [:string, ""],
      basic_auth_password: [:string, ""],
      log_level: [:level, "error"],
      sample_rate: [:number, 100],
      oncpu: [:bool, true],
      report_pid: [:bool, false],
      report_thread_id: [:bool, false],
      tags: [:pairs, {}],
      compression: [:word, "gzip"],
      report_encoding: [:word, "pprof"],
      autoinstrument_rails: [:bool, true],
      tenant_id: [:string, ""],
      http_headers: [:pairs, {}],
    }.freeze
    LEGACY = {
      auth_token: [:string, nil],
      detect_subprocesses: [:bool, nil],
    }.freeze
    SHARED = {
      output_dir: [:path, nil],
      upload_interval: [:duration, nil],
      stop_timeout: [:duration, nil],
      report_thread_name: [:bool, nil],
      otlp_endpoint: [:string, nil],
      otlp_headers: [:pairs, nil],
      otlp_protocol: [:string, nil],
      resource_attributes: [:string, nil],
      max_stacks: [:integer, nil],
      max_depth: [:integer, nil],
      sampler_cpu_budget: [:number, nil],
      strict_labels: [:bool, nil],
    }.freeze
    ALL = GEM.merge(LEGACY, SHARED).freeze

    # Understood here, never passed to the core (app_name becomes
    # application_name; auth_token an Authorization header).
    RUBY_ONLY = %i[app_name compression report_encoding autoinstrument_rails auth_token
                   detect_subprocesses].freeze
    # PYROSCOPE_* variables read here; the core is not shown them (it would
    # warn about names it does not know).
    RUBY_ONLY_ENV = %w[PYROSCOPE_AUTOINSTRUMENT_RAILS PYROSCOPE_COMPRESSION
                       PYROSCOPE_REPORT_ENCODING].freeze
    # Core settings a binding sets itself (not user settings here).
    BINDING_OWNED = %w[spy_name runtime_name runtime_version fault_guard].freeze
    DESTINATIONS = %w[server_address output_dir otlp_endpoint].freeze
    TRUE_WORDS = %w[1 true yes on].freeze
    FALSE_WORDS = %w[0 false no off].freeze
    # The pyroscope gem's log levels; "trace" is the core's "debug".
    LEVEL_ALIASES = { "trace" => "debug" }.freeze
    SPY_NAME = "rbspy" # the server's name for Ruby profiles

    module_function

    # [settings, env] for Pyroscope::Native.start: settings the user gave
    # (by core name, checked and converted), the pyroscope gem's defaults
    # where the core's differ and no variable sets them, and the
    # environment variables the core reads (PYROSCOPE_* of settings not
    # given here: a setting given here wins, its variable is not even
    # parsed; OTEL_*). Raises ConfigError naming a bad setting.
    def native_args(config, env = ENV)
      given = config.given
      settings = {}
      given.each do |key, value|
        value = convert(key, value) # every setting is checked, ours too
        settings[key.to_s] = value unless RUBY_ONLY.include?(key)
      end
      if given.key?(:app_name)
        settings["application_name"] = convert(:app_name, given[:app_name])
      end
      apply_auth_token(settings, given)
      env_out = core_env(env, settings.keys)
      defaults(settings, env_out)
      settings["spy_name"] = SPY_NAME unless env_set?(env_out, "spy_name")
      settings["runtime_name"] = defined?(RUBY_ENGINE) ? RUBY_ENGINE : "ruby"
      settings["runtime_version"] = RUBY_VERSION
      [settings, env_out]
    end

    # The value for Native.start of one setting, or ConfigError.
    def convert(key, value)
      name = key.to_s
      case ALL.fetch(key).first
      when :string
        string(name, value)
      when :path
        value = value.to_path if value.respond_to?(:to_path)
        string(name, value)
      when :bool
        return value if value == true || value == false

        raise ConfigError, "#{name} must be true or false, not #{value.inspect}"
      when :number
        number(name, value)
      when :integer
        return value if value.is_a?(Integer)

        raise ConfigError, "#{name} must be an Integer, not #{value.class}"
      when :duration
        value.is_a?(String) ? value : number(name, value)
      when :pairs
        pairs(name, value)
      when :level
        level(value)
      when :word
        return value.to_s if value.is_a?(String) || value.is_a?(Symbol)

        raise ConfigError, "#{name} must be a String, not #{value.class}"
      end
    end

    def string(name, value)
      raise ConfigError, "#{name} must be a String, not #{value.class}" unless value.is_a?(String)
      raise ConfigError, "#{name} must not contain a NUL byte" if value.include?("\0")

      value
    end

    def number(name, value)
      unless value.is_a?(Integer) || value.is_a?(Float)
        raise ConfigError, "#{name} must be a number, not #{value.class}"
      end
      raise ConfigError, "#{name} must be a finite number, not #{value}" unless value.finite?

      value
    end

    # The gem accepts any keys and values and sends their to_s.
    def pairs(name, value)
      raise ConfigError, "#{name} must be a Hash, not #{value.class}" unless value.is_a?(Hash)

      value.each_with_object({}) do |(k, v), out|
        k = k.is_a?(Symbol) ? k.name : k.to_s # Symbol#name: no new String each time
        v = v.is_a?(Symbol) ? v.name : v.to_s
        raise ConfigError, "#{name}: #{k.inspect} must not contain a NUL byte" if k.include?("\0") || v.include?("\0")

        out[k] = v
      end
    end

    def level(value)
      return value if value.is_a?(Integer)
      unless value.is_a?(String) || value.is_a?(Symbol)
        raise ConfigError, "log_level must be a String (trace, debug, info, warn, error), " \
                           "not #{value.class}"
      end
      word = value.to_s.downcase
      LEVEL_ALIASES.fetch(word, word)
    end

    # auth_token (pyroscope gem < 1.0) was sent as a bearer token.
    def apply_auth_token(settings, given)
      token = given[:auth_token]
      return if token.nil? || token.to_s.empty?

      headers = settings["http_headers"] || {}
      return if headers.keys.any? { |k| k.casecmp?("authorization") }

      settings["http_headers"] = headers.merge("Authorization" => "Bearer #{token}")
    end

    # Defaults of the pyroscope gem that differ from the core's: its server
    # address (only when no destination is set at all) and its log level.
    def defaults(settings, env)
      no_destination = DESTINATIONS.none? { |d| settings.key?(d) || env_set?(env, d) } &&
                       env.fetch("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "").strip.empty? &&
                       env.fetch("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip.empty?
      settings["server_address"] = GEM[:server_address].last if no_destination
      settings["log_level"] = GEM[:log_level].last unless settings.key?("log_level") ||
                                                          env_set?(env, "log_level")
    end

    def env_set?(env, name)
      !env.fetch("PYROSCOPE_#{name.upcase}", "").strip.empty?
    end

    # The variables the core applies (PYROSCOPE_* and OTEL_*), without those
    # of settings given as keywords and without the ones read here.
    def core_env(env, given_names)
      skip = given_names.map { |n| "PYROSCOPE_#{n.upcase}" } + RUBY_ONLY_ENV
      env.to_h.select do |k, _|
        (k.start_with?("PYROSCOPE_") && !skip.include?(k)) || k.start_with?("OTEL_")
      end
    end

    # A boolean from PYROSCOPE_<NAME>, or nil when unset.
    def env_bool(env, name)
      var = "PYROSCOPE_#{name.upcase}"
      raw = env.fetch(var, "").strip.downcase
      return nil if raw.empty?
      return true if TRUE_WORDS.include?(raw)
      return false if FALSE_WORDS.include?(raw)

      raise ConfigError, "environment variable #{var}: #{env[var].inspect} is not a boolean " \
                         "(use true/false, 1/0, yes/no, on/off)"
    end

    # Warnings for settings given that do nothing here.
    def warnings(config)
      given = config.given
      out = []
      if given.key?(:auth_token)
        out << "auth_token was removed in pyroscope 1.0; it is sent as an " \
               "'Authorization: Bearer' header (prefer basic_auth_username/password or " \
               "http_headers)"
      end
      if given.key?(:detect_subprocesses)
        out << "detect_subprocesses was removed in pyroscope 1.0 and is ignored: each Ruby " \
               "process profiles itself (forked workers included)"
      end
      out
    end
  end

  # The settings of a configure block: the pyroscope gem's Config (a Struct
  # with the same keys and defaults) plus the shared settings of
  # pyroscope-native. It remembers which settings the block assigned: the
  # others come from PYROSCOPE_* variables when set, else the defaults.
  # Owned by the thread that runs configure.
  Config = Struct.new(*Settings::ALL.keys) do
    def initialize(*)
      super()
      Settings::ALL.each { |key, (_, default)| self[key] = default.dup }
      @assigned = {}
    end

    # Assignments through c.key = v and c[:key] = v are both remembered.
    def []=(key, value)
      result = super
      @assigned[key.is_a?(Integer) ? members[key] : key.to_sym] = true if @assigned
      result
    end

    # The Struct's own setters, through []= (prepended: no redefinition).
    prepend(Module.new do
      Settings::ALL.each_key do |key|
        define_method(:"#{key}=") { |value| self[key] = value }
      end
    end)

    # The settings the block set, by name: assigned, or changed in place
    # (c.tags["k"] = "v"), and not nil (nil means "unset" here).
    def given
      Settings::ALL.each_with_object({}) do |(key, (_, default)), out|
        value = self[key]
        next if value.nil?

        out[key] = value if @assigned[key] || value != default
      end
    end

    def method_missing(name, *args, &block)
      return super unless name.to_s.end_with?("=")

      key = name.to_s.chomp("=")
      names = Settings::ALL.keys.map(&:to_s)
      near = defined?(DidYouMean::SpellChecker) ? DidYouMean::SpellChecker.new(dictionary: names).correct(key) : []
      hint = near.empty? ? "" : " (did you mean #{near.first}?)"
      err = UnknownSettingError.new("unknown setting `#{key}' for Pyroscope.configure#{hint}; " \
                                    "the settings are: #{names.join(', ')}", name, args,
                                    receiver: self)
      err.set_backtrace(caller(1)) # the user's line, not this one
      raise err
    end

    def respond_to_missing?(name, include_private = false)
      super
    end

    # Passwords and tokens are not shown.
    def inspect
      shown = Settings::ALL.keys.map do |key|
        value = self[key]
        value = "[REDACTED]" if %i[basic_auth_password auth_token].include?(key) &&
                                 !value.to_s.empty?
        "#{key}=#{value.inspect}"
      end
      "#<struct Pyroscope::Config #{shown.join(', ')}>"
    end
    alias_method :to_s, :inspect
  end
end
