# frozen_string_literal: true

require "uri"

module Pyroscope
  # A report option that is wrong (a filter that is not KEY=VALUE, an
  # unknown option, a missing path, a profile type not in the folder).
  class ReportError < ArgumentError; end

  # Reports of saved profiles: a self-contained flame graph page and the top
  # functions, from the core's report library (Native.report).
  #
  # Report.write is Pyroscope.write_report. begin_run / end_run give a run
  # with output_dir its own page: the folder's profiles are listed when the
  # profiler starts, and at stop (or exit) flamegraph.html covers the files
  # that appeared since, the ones this process wrote. end_run never raises:
  # a failure is logged.
  #
  # State (@run) is changed by configure and stop, which Pyroscope
  # serialises (CONTROL).
  module Report
    REPORT_NAME = "flamegraph.html"
    DEFAULT_TOP = 20
    OPTIONS = %i[output title filter group_by top diff type].freeze

    class << self
      # Reads profiles (files, or folders of them) and writes the page. A
      # folder gives its profiles of one type (type:, default cpu, else wall):
      # the page shows one sample type at a time. Returns {profiles:, output:,
      # text:, type:, other_types:}; text is the top table (top: functions),
      # after the total per value of group_by's label.
      def write(paths, **opts)
        unknown = opts.keys - OPTIONS
        raise ReportError, "write_report: unknown option #{unknown.first} (options: #{OPTIONS.join(", ")})" unless unknown.empty?

        list = Array(paths).map { |p| p.respond_to?(:to_path) ? p.to_path : p }
        if list.empty? || !list.all? { |p| p.is_a?(String) && !p.empty? }
          raise ReportError, "write_report: paths must be a profile file or folder, or a list of them"
        end
        list.each { |p| raise ReportError, "write_report: #{p}: no such file or folder" unless File.exist?(p) }
        files, type, others, page = expand(list, opts[:type])
        filter = selection("filter", opts[:filter])
        group_by = opts[:group_by]&.to_s
        top = opts.fetch(:top, DEFAULT_TOP)
        raise ReportError, "top: a whole number >= 0" unless top.is_a?(Integer) && top >= 0

        diff = diff_of(opts[:diff])
        output = opts.key?(:output) ? opts[:output] : default_output(list.first, page)
        output = output.to_path if output.respond_to?(:to_path)
        title = opts[:title]&.to_s || list.map { |p| File.basename(File.expand_path(p)) }.join(", ")
        profiles, text = Native.report(files, output, title, top, filter, group_by, diff&.first,
                                       diff&.last, view(filter, group_by, diff))
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

      # One page per profile type of the files this run wrote. A forked child
      # leaves the page to the process that configured the profiler.
      def end_run
        run = @run
        @run = nil
        return if run.nil? || run[:pid] != Process.pid

        pages = Native.run_end
        if pages.empty?
          Pyroscope.log(20, "no profiles were written to #{run[:dir]} in this run, so there is no flame graph")
          return
        end
        pages.each { |page| write_page(run, page) }
      rescue StandardError => e
        Pyroscope.log(30, "cannot write the flame graph: #{e.message}")
      end

      private

      def write_page(run, page)
        output = File.join(run[:dir], page["page"])
        type = page["type"]
        if page["paths"].size < page["total"] # the newest only: a long run's stop must not read for minutes
          Pyroscope.log(20, "the #{type} flame graph covers the last #{page["paths"].size} of the #{page["total"]} profiles this run wrote")
        end
        profiles, = Native.report(page["paths"], output, "#{run[:app]} (#{type})", 0, [], nil, nil, nil, "")
        Pyroscope.log(20, "#{profiles} profile#{profiles == 1 ? "" : "s"} in #{run[:dir]}, flame graph: #{output}")
      rescue StandardError => e
        Pyroscope.log(30, "cannot write the flame graph: #{e.message}")
      end

      # Folders expanded to their profiles of one type (the core's pages:
      # type:, else the first, the time profile); files as given.
      # -> [files, type or nil, other types, default page name]
      def expand(paths, type)
        dirs, files = paths.partition { |p| File.directory?(p) }
        pages = {}
        dirs.each do |d|
          Native.folder_pages(d).each { |g| (pages[g["type"]] ||= g.merge("paths" => [])).fetch("paths").concat(g["paths"]) }
        end
        if pages.empty?
          raise ReportError, "write_report: no profiles (.pb or .pb.gz files) in #{paths.join(", ")}" if files.empty?

          return [files, nil, [], REPORT_NAME]
        end
        chosen = type&.to_s || pages.keys.first
        unless pages.key?(chosen)
          raise ReportError, "type: no #{chosen} profiles in #{paths.join(", ")} (there are: #{pages.keys.join(", ")})"
        end
        [pages[chosen]["paths"].sort + files, chosen, pages.keys - [chosen], pages[chosen]["page"]]
      end

      def default_output(first, page)
        File.join(File.directory?(first) ? first : File.dirname(first), page)
      end

      # "k=v" (split at the first "="), or [k, v] -> [k, v].
      def pair(what, item)
        if item.is_a?(Array) && item.size == 2 && !item[0].to_s.empty?
          return [item[0].to_s, item[1].to_s]
        end
        if item.is_a?(String)
          key, sep, value = item.partition("=")
          return [key.strip, value] unless sep.empty? || key.strip.empty?
        end
        raise ReportError, "#{what}: expected KEY=VALUE, got #{item.inspect}"
      end

      # {k => v or [v, ...]}, ["k=v", ...] or "k=v,k2=v2" -> [[k, v], ...]
      def selection(what, sel)
        case sel
        when nil then []
        when String then sel.split(",").map { |p| pair(what, p) }
        when Hash then sel.flat_map { |k, v| Array(v).map { |one| pair(what, [k, one]) } }
        when Array then sel.map { |p| pair(what, p) }
        else raise ReportError, "#{what}: expected {key => value} or KEY=VALUE strings"
        end
      end

      def diff_of(diff)
        return nil if diff.nil?
        raise ReportError, "diff: two selections [a, b], e.g. [{route: \"/a\"}, {route: \"/b\"}]" unless diff.is_a?(Array) && diff.size == 2

        diff.map { |sel| selection("diff", sel) }
      end

      # The page's initial view, in its URL-fragment syntax.
      def view(filter, group_by, diff)
        joined = ->(pairs) { pairs.map { |k, v| "#{k}=#{v}" }.join(",") }
        parts = []
        parts << ["filter", joined.call(filter)] unless filter.empty?
        parts << ["group", group_by] if group_by
        parts.push(["diff", ""], ["a", joined.call(diff[0])], ["b", joined.call(diff[1])]) if diff
        URI.encode_www_form(parts)
      end
    end
  end

  # Flame graph page and top table of saved profiles: see Report.write.
  def self.write_report(paths, **opts)
    Report.write(paths, **opts)
  end
end
