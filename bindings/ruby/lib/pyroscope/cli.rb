# frozen_string_literal: true

module Pyroscope
  # The gem's command line (exe/pyroscope-native), as Python's
  # `python -m pyroscope report` and Node's `npx pyroscope-native report`:
  #
  #   pyroscope-native report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
  #       [--filter KEY=VALUE]... [--group-by KEY] [--diff [A B]]
  #
  # The core's report command (pn_report_command_run) parses the words, runs
  # the report and says what to print; exit status 2 on a usage error, 1
  # when the profiles cannot be read.
  module CLI
    def self.run(argv, out: $stdout, err: $stderr)
      status, text, errors = Native.report_command("pyroscope-native", argv.map(&:to_s))
      out.print text
      err.print errors
      status
    end
  end
end
