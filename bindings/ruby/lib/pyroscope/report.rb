# frozen_string_literal: true

module Pyroscope
  # A report option that is wrong (a filter that is not KEY=VALUE, an
  # unknown option, a missing path, a profile type not in the folder).
  class ReportError < ArgumentError; end

  # Reports of saved profiles, from the core's report library: what the
  # options mean (folders by type, the default page and title, selections,
  # the page's view) and the run's own pages are the core's
  # (pyroscope_report.h); this module maps Ruby's spelling and types to them.
  #
  # Report.write is Pyroscope.write_report. begin_run / end_run give a run
  # with output_dir its pages: the folder is listed when the profiler
  # starts, and at stop (or exit) the core writes and logs the pages of the
  # files that appeared since. end_run never raises.
  #
  # State (@run) is changed by configure and stop, which Pyroscope
  # serialises (CONTROL).
  module Report
    OPTIONS = %i[output title filter group_by top diff type].freeze

    class << self
      # Returns {profiles:, output:, text:, type:, other_types:}.
      def write(paths, **opts)
        unknown = opts.keys - OPTIONS
        raise ReportError, "write_report: unknown option #{unknown.first} (options: #{OPTIONS.join(", ")})" unless unknown.empty?

        diff = opts.delete(:diff)
        unless diff.nil? || (diff.is_a?(Array) && diff.size == 2)
          raise ReportError, "diff: two selections [a, b], e.g. [{route: \"/a\"}, {route: \"/b\"}]"
        end

        opts[:output] = opts[:output].to_path if opts[:output].respond_to?(:to_path)
        opts[:filter] = selection(opts[:filter])
        opts[:diff_a], opts[:diff_b] = diff.map { |sel| selection(sel) } if diff
        list = Array(paths).map { |p| p.respond_to?(:to_path) ? p.to_path : p }
        profiles, text, output, type, others = Native.report(list, opts)
        { profiles: profiles, output: output, text: text, type: type, other_types: others }
      end

      # resolved: the settings the profiler runs with (Native.resolve).
      def begin_run(resolved)
        dir = resolved["output_dir"]
        app = resolved["application_name"]
        return @run = nil if dir.empty?

        dir = File.expand_path(dir)
        # a restart with the same folder keeps the run (its files are this process's)
        return if @run && @run[:dir] == dir && @run[:pid] == Process.pid

        Native.run_begin(dir) # the core's run report: the folder's listing now
        @run = { dir: dir, app: app.empty? ? "ruby" : app, pid: Process.pid }
      end

      # A forked child leaves the pages to the process that configured the
      # profiler.
      def end_run
        run = @run
        @run = nil
        Native.run_report(run[:app]) if run && run[:pid] == Process.pid
      rescue StandardError => e
        Pyroscope.log(40, "cannot write the flame graph: #{e.message}")
      end

      private

      # {k => v or [v, ...]} -> [[k, v], ...]; the rest is the core's.
      def selection(sel)
        sel.is_a?(Hash) ? sel.flat_map { |k, v| Array(v).map { |one| [k.to_s, one.to_s] } } : sel
      end
    end
  end

  # Flame graph page and top table of saved profiles: see Report.write.
  def self.write_report(paths, **opts)
    Report.write(paths, **opts)
  end
end
