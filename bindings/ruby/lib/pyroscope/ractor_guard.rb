# frozen_string_literal: true

# Ractors and the memory profile's object hooks.
#
# Before Ruby 3.3, starting a Ractor while a NEWOBJ hook is on crashes the
# VM (Ruby bug #18464: the new Ractor's first objects fire the hook before
# its control frame exists), whoever added the hook (ObjectSpace tracing,
# memory_profiler, us). So there, Ractor.new first takes our hooks off: the
# memory profile stops (logged once; CPU profiling goes on), the Ractor
# starts. 3.3+ has the fix, and nothing is done.
require "pyroscope/native"

module Pyroscope
  module RactorGuard
    def new(*args, **kwargs, &block)
      Pyroscope::Native._memory_off_for_ractor
      super
    end
  end
end

if defined?(Ractor) && Gem::Version.new(RUBY_VERSION) < Gem::Version.new("3.3")
  Ractor.singleton_class.prepend(Pyroscope::RactorGuard)
end
