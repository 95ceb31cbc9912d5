# frozen_string_literal: true

# Ractors and the memory profile's object hooks.
#
# Before Ruby 3.3, starting a Ractor while a NEWOBJ hook is on crashes the
# VM (Ruby bug #18464: the new Ractor's first objects fire the hook before
# its control frame exists), whoever added the hook (ObjectSpace tracing,
# memory_profiler, us), and whichever Ractor starts it. So there, Ractor.new
# in the main Ractor first takes our hooks off: the memory profile stops
# (logged once; CPU profiling goes on), the Ractor starts. The extension may
# not be called from another Ractor (main_ractor.rb), so a profiler started
# while other Ractors run, which may start more, starts without the memory
# profile. 3.3+ has the fix, and nothing is done.
require "pyroscope/main_ractor"
require "pyroscope/native"

module Pyroscope
  module RactorGuard
    NEEDED = defined?(Ractor) && Gem::Version.new(RUBY_VERSION) < Gem::Version.new("3.3")
    # Held (main Ractor) across a start and its check of other Ractors, and
    # by Ractor.new: no Ractor starts between the two.
    LOCK = Mutex.new

    # Whether other Ractors run, on a Ruby whose object hooks crash them.
    def self.others_run?
      NEEDED && Ractor.count > 1
    end

    # Runs the block holding LOCK, or without it where it cannot be taken
    # (in a trap handler, or held by this thread): never raises of its own.
    def self.exclusive
      held = begin
        LOCK.lock
      rescue ThreadError
        nil
      end
      begin
        yield
      ensure
        LOCK.unlock if held
      end
    end

    # configure's start (main Ractor; resolved: what the settings resolve
    # to): without the memory profile while other Ractors run.
    def self.start(settings, resolved, env)
      exclusive do
        if resolved["memory"] == "true" && others_run?
          Pyroscope.log(30, "memory profile off: other Ractors run, and on Ruby before 3.3 the " \
                            "VM's object hooks crash a starting Ractor (Ruby bug #18464); CPU " \
                            "profiling goes on")
          settings = settings.merge("memory" => false)
        end
        Native.start(settings, env)
      end
    end

    # fork.rb, after a failed exec (main Ractor): the last start again, the
    # object hooks taken off if Ractors have started since (on for the
    # microseconds in between: another Ractor starting one then would crash).
    def self.restart
      exclusive do
        Native._restart
        Native._memory_off_for_ractor if others_run?
      end
    end

    def new(*args, **kwargs, &block)
      return super unless MainRactor.current?

      RactorGuard.exclusive do
        Pyroscope::Native._memory_off_for_ractor
        super
      end
    end
  end
end

Ractor.singleton_class.prepend(Pyroscope::RactorGuard) if Pyroscope::RactorGuard::NEEDED
