# frozen_string_literal: true

module Pyroscope
  # Carries the core's log lines to Pyroscope.logger. The extension hands
  # them over from wherever it drains its ring, which includes the sampling
  # job: that runs in "trap context", where a Logger cannot write (its Mutex
  # raises ThreadError there). So lines are queued (Queue#push is allowed
  # there) and written by a thread of ours that waits on the queue; stop and
  # exit write what is left. The thread is started on the first line, and
  # again in a forked child, where it does not exist.
  module LogRelay
    QUEUE = Queue.new # of [level, message]

    class << self
      def push(level, message)
        QUEUE.push([level, message])
        start_thread unless @thread&.alive?
      end

      # Writes the queued lines on the calling thread (not from a trap).
      def drain
        loop { write(QUEUE.pop(true)) }
      rescue ThreadError
        nil # empty
      end

      private

      def start_thread
        @thread = Thread.new do
          Thread.current.name = "pyroscope-log"
          Thread.current.report_on_exception = false
          loop { write(QUEUE.pop) }
        end
      end

      def write((level, message))
        Pyroscope.log(level, message)
      end
    end
  end
end
