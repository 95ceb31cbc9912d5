# frozen_string_literal: true

module Pyroscope
  # A bad setting or label; the message names it. The C extension defines
  # it too (same superclass), whichever of the two loads first.
  ConfigError = Class.new(ArgumentError) unless const_defined?(:ConfigError)

  # `c.no_such_setting = 1` in a configure block. The pyroscope gem's Config
  # is a Struct, so this was a NoMethodError there too; this one says that
  # the name is not a setting and lists the ones that are.
  class UnknownSettingError < NoMethodError; end

  # Every setting of Pyroscope.configure comes from the core's settings
  # table (Native.setting_table): a row with a "ruby" keyword is a Config
  # key (the first spelling; app_name is the gem's alias), of the row's kind,
  # read from its variable by the core when the block does not set it.
  module Settings
    TABLE = Native.setting_table.freeze
    ROW = TABLE.each_with_object({}) do |row, out|
      row["ruby"]&.split("|")&.each { |key| out[key.to_sym] = row }
    end.freeze
    # The pyroscope gem 1.1 Config's defaults where they are not the core's
    # (a String where the core has none); the others are the core's.
    GEM_DEFAULTS = {
      application_name: "", server_address: "http://localhost:4040",
      basic_auth_username: "", basic_auth_password: "", tenant_id: "", tags: {}, http_headers: {}
    }.freeze
    # Removed from the pyroscope gem in 1.0; accepted with a warning.
    LEGACY = %i[detect_subprocesses].freeze

    module_function

    # A row's default as the gem's Config showed it (100, true, "warning").
    def default(key)
      return GEM_DEFAULTS[key].dup if GEM_DEFAULTS.key?(key)

      row = ROW[key]
      return nil unless row && row["ruby"].split("|").first == key.to_s # app_name: an alias
      return {} if row["kind"] == "pairs"

      text = row["default"]
      return nil if text.nil?

      case row["kind"]
      when "bool" then text == "true"
      when "number", "integer" then text.include?(".") ? Float(text) : Integer(text)
      else text
      end
    end

    # [settings, env] for Pyroscope::Native.start: settings the user gave
    # (by core name) and the environment's PYROSCOPE_* and OTEL_* variables,
    # which the core applies under its precedence rule (a setting given here
    # wins; its variable is not even parsed), and resolves this binding's own
    # settings (auth_token, autoinstrument_rails, ...) too. The core checks
    # each value against its setting's kind (Native raises ConfigError naming
    # it); only the gem's leniencies are Ruby's, here.
    def native_args(config, env = ENV)
      given = config.given
      settings = {}
      # app_name (the gem's alias) follows application_name in ROW: it wins.
      given.each { |key, value| settings[ROW[key]["name"]] = lenient(key, value) if ROW[key] }
      [settings, env.to_h.select { |k, _| k.start_with?("PYROSCOPE_", "OTEL_") }]
    end

    # What the gem took beyond the core's types: a Symbol for a level or a
    # binding's own word (compression: :gzip), a path object, JSON text of
    # http_headers (Native sends a Hash's to_s and leaves nil values out).
    def lenient(key, value)
      row = ROW[key]
      return value.name if value.is_a?(Symbol) && (row["external"] || row["kind"] == "level")
      return value.to_path if value.respond_to?(:to_path) && row["kind"] == "string"
      return json_object(key.to_s, value) if value.is_a?(String) && key == :http_headers

      value
    end

    def json_object(name, text)
      require "json"
      parsed = JSON.parse(text)
      return parsed if parsed.is_a?(Hash)

      raise ConfigError, "#{name}: a String must be a JSON object, not #{parsed.class}"
    rescue JSON::ParserError => e
      raise ConfigError, "#{name}: a String must be a JSON object (#{e.message.lines.first.strip})"
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
      given.each do |key, value|
        value = lenient(key, value) if ROW[key] && ROW[key]["kind"] == "pairs"
        next unless value.is_a?(Hash)

        value.each { |k, v| out << "#{key}: #{k.to_s.inspect} is nil; it is left out" if v.nil? }
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
  Config = Struct.new(*Settings::ROW.keys, *Settings::LEGACY) do
    def initialize(*)
      super()
      members.each { |key| self[key] = Settings.default(key) }
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
      Settings::ROW.each_key do |key|
        define_method(:"#{key}=") { |value| self[key] = value }
      end
    end)

    # The settings the block set, by name: assigned, or changed in place
    # (c.tags["k"] = "v"), and not nil (nil means "unset" here).
    def given
      members.each_with_object({}) do |key, out|
        value = self[key]
        next if value.nil?

        out[key] = value if @assigned[key] || value != Settings.default(key)
      end
    end

    def method_missing(name, *args, &block)
      return super unless name.to_s.end_with?("=")

      key = name.to_s.chomp("=")
      names = members.map(&:to_s)
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
      shown = members.map do |key|
        value = self[key]
        value = "[REDACTED]" if Settings::ROW[key]&.fetch("secret") && !value.to_s.empty?
        "#{key}=#{value.inspect}"
      end
      "#<struct Pyroscope::Config #{shown.join(', ')}>"
    end
    alias_method :to_s, :inspect
  end
end
