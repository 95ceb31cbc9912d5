# frozen_string_literal: true

module Pyroscope
  # Whether the caller runs in the main Ractor. The methods the gem prepends
  # to core classes (Fiber.new, Enumerator#next, exec, fork, Ractor.new) run
  # in every Ractor, but the extension's methods may be called from the main
  # one only (they share the process's one profiler and are not marked
  # Ractor-safe; Ruby raises Ractor::UnsafeError elsewhere). So in another
  # Ractor those methods only call super: the profiler never throws into
  # application code, and it samples the main Ractor's threads only anyway.
  module MainRactor
    if !defined?(Ractor)
      def self.current?
        true
      end
    elsif Ractor.respond_to?(:main?) # 3.4+
      def self.current?
        Ractor.main?
      end
    else
      # One Ractor: the main one (the cheap test first). Not cached: a
      # fork's child has the forking Ractor as its main one.
      def self.current?
        Ractor.count == 1 || Ractor.current == Ractor.main
      end
    end
  end
end
