# frozen_string_literal: true

# Continuous profiling for CRuby, with the API of the pyroscope gem 1.1:
#
#   require "pyroscope"
#   Pyroscope.configure do |c|
#     c.application_name = "my.app"
#     c.server_address = "http://pyroscope:4040"
#   end
#   Pyroscope.tag_wrapper({ "controller" => "checkout" }) { handle }
#
# Sampling, labels and uploads are native (the pyroscope_native extension
# on the shared pyroscope-native core); this file maps the gem's API onto
# it. Labels belong to the running Fiber. See docs/ruby.md.

require "pyroscope/version"
require "pyroscope/native"
require "pyroscope/main_ractor"
require "pyroscope/config"
require "pyroscope/log_relay"
require "pyroscope/fork"
require "pyroscope/ractor_guard"
require "pyroscope/fiber_inherit"
require "pyroscope/sender"
require "pyroscope/report"

module Pyroscope
  # Serialises configure and stop (any thread may call them). Ruby releases
  # a Mutex held by a thread that does not survive fork, so a forked child
  # can take it.
  CONTROL = Mutex.new
  private_constant :CONTROL

  # Core log levels (Python's numbers) to Logger severities.
  LOGGER_SEVERITY = { 10 => 0, 20 => 1, 30 => 2, 40 => 3 }.freeze
  private_constant :LOGGER_SEVERITY

  # Counters that say an upload was lost (flush is false when they move).
  LOST_UPLOADS = %w[uploads_failed uploads_dropped].freeze
  private_constant :LOST_UPLOADS

  class << self
    # The Config of the last configure (nil before), as in the pyroscope gem.
    def current_config
      @config
    end

    # Starts profiling this process, or restarts it with new settings. The
    # block receives a Config; every setting may also come from its
    # PYROSCOPE_<NAME> variable, and a setting given in the block wins. An
    # unknown setting raises UnknownSettingError (a NoMethodError), a bad
    # value ConfigError (an ArgumentError); both name the setting, and a
    # profiler that was running keeps running then, unless the core refused
    # the new settings (then nothing runs). Returns true.
    def configure
      config = Config.new
      yield config if block_given?
      settings, env = Settings.native_args(config)
      resolved = Native.resolve(settings, env) # what start runs with (the core's contract)
      config.autoinstrument_rails = resolved["autoinstrument_rails"] == "true"
      Settings.warnings(config).each { |w| warn("pyroscope: #{w}", uplevel: 1) }
      CONTROL.synchronize do
        Native.stop if Native.running?
        Sender.ensure_running if Sender.uploads?(resolved) # only without libcurl
        RactorGuard.start(settings, resolved, env)
        Report.begin_run(resolved) # with output_dir: the page at stop covers this run
        @config = config
      end
      install_exit_hook
      RailsHook.define_railtie
      true
    end

    # Final upload (within stop_timeout, default 5 s, even when the server
    # is down), then stop sampling. Safe when not running. Labels keep
    # working. Returns true when a running profiler was stopped.
    def stop
      stopped = CONTROL.synchronize do
        ran = !Native.stop.nil?
        Report.end_run # with output_dir: flamegraph.html of this run's profiles (never raises)
        ran
      end
      LogRelay.drain
      stopped
    end

    def shutdown
      stop
    end

    # Uploads (or writes) the current period now and waits at most timeout
    # seconds. True when everything queued was handled in time and no
    # upload failed or was dropped meanwhile.
    def flush(timeout = 5.0)
      unless timeout.is_a?(Numeric) && timeout.real? && timeout.finite?
        raise ConfigError, "timeout must be a finite number, not #{timeout.inspect}"
      end
      timeout = timeout.to_f
      before = Native.stats
      done = Native.flush(timeout)
      after = Native.stats
      done && LOST_UPLOADS.all? { |key| after.fetch(key, 0) <= before.fetch(key, 0) }
    end

    def running?
      Native.running?
    end

    # Counters of the sampler, the driver and the exporters.
    # "ractors_not_sampled": Ractors other than the main one, running now;
    # only the main Ractor's threads are sampled.
    def stats
      Native.stats.merge("ractors_not_sampled" => defined?(Ractor) ? Ractor.count - 1 : 0)
    end

    # Runs the block with the tags added to the current Fiber's labels and
    # returns its value. Afterwards (exceptions included) the Fiber's labels
    # are exactly what they were, so nesting restores the outer values. Works
    # whether or not the profiler runs. Keys and values are converted with
    # to_s; a nil value drops its tag, and a key or value the server would
    # refuse is made valid (or dropped), counted in stats ("labels_coerced",
    # "labels_dropped") and logged, one warning a minute: tags never fail the
    # block. With strict_labels set they raise ConfigError naming the tag.
    # In a Ractor other than the main one (not sampled) it only yields.
    def tag_wrapper(tags)
      raise ArgumentError, "Pyroscope.tag_wrapper needs a block" unless block_given?
      return yield unless MainRactor.current?

      token = Native.labels_push(label_pairs(tags, "tag_wrapper"))
      begin
        yield
      ensure
        Native.labels_restore(token)
      end
    end

    # Deprecated in the pyroscope gem since 0.3 and doing nothing there too.
    def tag(_tags)
      warn("deprecated. Use `Pyroscope.tag_wrapper` instead.", uplevel: 1)
    end

    def remove_tags(*_tags)
      warn("deprecated. Use `Pyroscope.tag_wrapper` instead.", uplevel: 1)
    end

    # _add_tags(tags) or, as before pyroscope 1.0 (and pyroscope-otel),
    # _add_tags(thread_id, tags): adds the tags to the current Fiber's
    # labels until _remove_tags. thread_id must be the caller's own.
    def _add_tags(*args)
      Native.labels_push(label_pairs(tags_arg(args, "_add_tags"), "_add_tags"))
      true
    end

    # Removes each tag whose current value is the one given.
    def _remove_tags(*args)
      Native.labels_remove(label_pairs(tags_arg(args, "_remove_tags"), "_remove_tags"))
      true
    end

    # The calling thread's kernel thread id (what _add_tags(thread_id, ...)
    # expects, and the thread_id label of report_thread_id).
    def thread_id
      Native.thread_id
    end

    # Where the core's messages (and this library's) go: nil (default) is
    # standard error, or any Logger; both get what the log_level setting
    # lets through (default "error").
    attr_reader :logger

    def logger=(logger)
      @logger = logger
      Native.log_handler = logger && proc { |level, msg| LogRelay.push(level, msg) }
    end

    # A message at a core level (10 debug, 20 info, 30 warn, 40 error).
    def log(level, message)
      if @logger
        @logger.add(LOGGER_SEVERITY.fetch(level.clamp(10, 40) / 10 * 10, 3), message, "pyroscope")
      elsif level >= 30
        warn("pyroscope: #{message}")
      end
    rescue StandardError
      nil # a broken logger must not break the application
    end

    private

    def tags_arg(args, what)
      case args.size
      when 1
        args.first
      when 2
        tid, tags = args
        unless tid.nil? || tid == Native.thread_id
          raise ArgumentError, "Pyroscope.#{what}: labels act on the calling thread's " \
                               "current Fiber; thread id #{tid} is another thread"
        end
        tags
      else
        raise ArgumentError, "Pyroscope.#{what} takes (tags) or (thread_id, tags), " \
                             "not #{args.size} arguments"
      end
    end

    # Tags as Native takes them: a Hash of Strings (nil: no value) without
    # NUL bytes, in UTF-8. The common case (already so) is passed on as it
    # is, without a copy. Anything else is converted as the pyroscope gem
    # did (to_s); what cannot be (not a Hash) is no tags, counted.
    def label_pairs(tags, what)
      return tags if tags.is_a?(Hash) && tags.all? { |k, v| plain?(k) && plain?(v) }
      unless tags.respond_to?(:each_pair)
        raise ConfigError, "Pyroscope.#{what}: tags must be a Hash, not #{tags.class}" if Native.labels_strict?

        Native.labels_note_fix(true, tags.class.to_s, "tags given as #{tags.class}, not a Hash: ignored")
        return {}
      end

      (tags.is_a?(Hash) ? tags : tags.each_pair.to_h).each_with_object({}) do |(k, v), out|
        out[label_text(k, what)] = v.nil? ? nil : label_text(v, what)
      end
    end

    def label_text(obj, what)
      text = obj.is_a?(Symbol) ? obj.name : obj.to_s
      unless utf8ish?(text)
        text = text.encode(Encoding::UTF_8, invalid: :replace, undef: :replace)
      end
      return text unless text.include?("\0")
      raise ConfigError, "Pyroscope.#{what}: #{text.inspect} must not contain a NUL byte" if Native.labels_strict?

      Native.labels_note_fix(false, text.split("\0").first.to_s, "NUL character made U+FFFD")
      text.gsub("\0", "\uFFFD")
    rescue StandardError => e
      raise if e.is_a?(ConfigError)

      "?" # a to_s that raises, or an encoding that cannot convert
    end

    def plain?(text)
      text.is_a?(String) && !text.include?("\0") && utf8ish?(text)
    end

    # Bytes the core reads as UTF-8 (it makes invalid sequences U+FFFD).
    def utf8ish?(text)
      enc = text.encoding
      enc == Encoding::UTF_8 || enc == Encoding::US_ASCII || enc == Encoding::ASCII_8BIT
    end

    def install_exit_hook
      return if @exit_hook

      @exit_hook = true
      at_exit { Pyroscope.stop }
    end
  end
end

require "pyroscope/rails"
