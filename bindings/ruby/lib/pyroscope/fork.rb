# frozen_string_literal: true

# Fork and exec around a running profiler.
#
# fork: the core's fork path runs inside fork() itself (pthread_atfork): the
# child gets fresh threads and store and profiles itself, with its own
# `pid` label, without configure being called again; the parent goes on
# unchanged. Process._fork (Ruby 3.1+, what fork, Process.fork and
# Kernel#fork all go through) finishes the child's part that needs the GVL.
#
# exec: a SIGPROF still pending when exec runs would kill the new program
# ("Profiling timer expired"), so exec first stops the profiler (its final
# flush: this process ends here) and discards pending signals; if exec
# fails, the profiler starts again with the same settings.
#
# Main Ractor only (main_ractor.rb). An exec from another Ractor leaves the
# profiler be (its last period is not sent): our SIGPROFs go to the main
# Ractor's threads only, whose pending signals die with them in exec. A
# fork's child is always the main Ractor (Ruby makes the forking one main).
require "pyroscope/main_ractor"
require "pyroscope/native"
require "pyroscope/ractor_guard"

module Pyroscope
  module ForkHook
    def _fork
      pid = super
      if pid.zero? && MainRactor.current?
        Pyroscope::Native._after_fork_child
        Pyroscope::Sender.after_fork_child if defined?(Pyroscope::Sender)
      end
      pid
    end
  end

  module ExecGuard
    ruby2_keywords def exec(*args)
      return super unless MainRactor.current?

      was_running = Pyroscope::Native._before_exec
      begin
        super
      ensure
        # Only reached when exec failed (it raised).
        RactorGuard.restart if was_running
      end
    end
  end

  # Kernel#exec is private (callable without a receiver only).
  module PrivateExecGuard
    include ExecGuard
    private :exec
  end
end

Process.singleton_class.prepend(Pyroscope::ForkHook)
Kernel.prepend(Pyroscope::PrivateExecGuard)
Kernel.singleton_class.prepend(Pyroscope::ExecGuard)
Process.singleton_class.prepend(Pyroscope::ExecGuard)
