# frozen_string_literal: true

require "optparse"

module Pyroscope
  # The gem's command line (exe/pyroscope-native), as Python's
  # `python -m pyroscope report` and Node's `npx pyroscope-native report`:
  #
  #   pyroscope-native report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
  #       [--filter KEY=VALUE]... [--group-by KEY] [--diff A B]
  #
  # Prints the top functions (after the total per value of --group-by's label)
  # and writes the flame graph page. Exit status 2 on a usage error, 1 when
  # the profiles cannot be read.
  module CLI
    USAGE = <<~TEXT
      usage: pyroscope-native report PATH... [--output HTML] [--top N] [--title TITLE] [--type TYPE]
               [--filter KEY=VALUE]... [--group-by KEY] [--diff A B]

        PATH             a profile (.pb or .pb.gz) or a folder of them (e.g. an output_dir)
        --output, -o     where to write the flame graph page (default: flamegraph.html in the
                         first folder, or next to the first file)
        --top N          functions listed (default 20; 0: none)
        --title TITLE    title of the page
        --type TYPE      which profiles of a folder: cpu, wall or memory (default cpu, else wall)
        --filter K=V     only samples with this label (repeatable: different keys must all
                         match, values of one key are alternatives; K=(none): without it)
        --group-by KEY   print the total per value of this label
        --diff A B       compare two selections, each KEY=VALUE[,KEY=VALUE...]
    TEXT

    class << self
      def run(argv, out: $stdout, err: $stderr)
        args = argv.dup
        command = args.shift
        if %w[-h --help help].include?(command)
          out.puts USAGE
          return 0
        end
        raise OptionParser::ParseError, "the command is `report`" unless command == "report"

        opts, paths = parse(args)
        if opts.delete(:help)
          out.puts USAGE
          return 0
        end
        raise OptionParser::ParseError, "a profile file or folder is required" if paths.empty?

        r = Pyroscope.write_report(paths, **opts)
        out.print r[:text]
        n = r[:profiles]
        out.puts "#{n} #{n == 1 ? "profile" : "profiles"} read, flame graph: #{r[:output]}"
        0
      rescue OptionParser::ParseError, ReportError => e
        err.puts "pyroscope-native: #{e.message}", USAGE
        2
      rescue StandardError => e
        err.puts "pyroscope-native: #{e.message}"
        1
      end

      private

      def parse(args)
        opts = { filter: [] }
        # --diff takes the two words after it (A and B).
        if (i = args.index("--diff"))
          a, b = args[i + 1], args[i + 2]
          if a.nil? || b.nil? || a.start_with?("-") || b.start_with?("-")
            raise OptionParser::ParseError, "--diff takes two selections: --diff KEY=VALUE[,...] KEY=VALUE[,...]"
          end
          opts[:diff] = [a, b]
          args = args[0...i] + args[(i + 3)..]
        end
        paths = OptionParser.new do |o|
          o.on("-o", "--output HTML") { |v| opts[:output] = v }
          o.on("--top N", Integer) do |v|
            raise OptionParser::InvalidArgument, "--top #{v}" if v.negative?

            opts[:top] = v
          end
          o.on("--title TITLE") { |v| opts[:title] = v }
          o.on("--type TYPE") { |v| opts[:type] = v }
          o.on("--filter KEY=VALUE") { |v| opts[:filter] << v }
          o.on("--group-by KEY") { |v| opts[:group_by] = v }
          o.on("-h", "--help") { opts[:help] = true }
        end.parse(args)
        opts.delete(:filter) if opts[:filter].empty?
        [opts, paths]
      end
    end
  end
end
