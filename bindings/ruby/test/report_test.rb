# frozen_string_literal: true

require "json"
require_relative "test_helper"

# The flame graph of a folder output: written by Pyroscope.stop (and so at
# exit) for the profiles the run wrote, and only those, and by
# Pyroscope.write_report, from the core's report library. The page's data
# (JSON in <script id="pn-data">) is parsed, not grepped.
class ReportTest < Minitest::Test
  include PyroscopeTest

  def page_names(file)
    html = File.read(file)
    m = %r{<script id="pn-data" type="application/json">(.*?)</script>}m.match(html)
    assert m, "#{file} has no pn-data block"
    data = JSON.parse(m[1])
    assert_kind_of Array, data["names"]
    data["names"]
  end

  def named?(names, method)
    names.any? { |n| n.is_a?(String) && n.include?(method) }
  end

  # A child that burns CPU in report_hot_work under output_dir and ends as
  # `ending` says (the at_exit hook stops it when the code does not).
  def run_child(dir, ending = "")
    code = <<~RUBY
      Pyroscope.configure do |c|
        c.application_name = "report.child"
        c.output_dir = #{dir.inspect}
        c.sample_rate = 200
        c.sampler_cpu_budget = 0
        c.tags = { "phase" => "hot" }
      end
    RUBY
    code += burn_source("report_hot_work") + "report_hot_work(0.4)\n" + ending
    out, err, status = ruby_child(code)
    assert status.success?, err
    [out, err]
  end

  def test_exit_writes_the_page_of_this_runs_profiles_only
    Dir.mktmpdir do |dir|
      # a profile from an earlier run, unreadable: the page must leave it out
      File.write(File.join(dir, "old.app-cpu-1-2.pb.gz"), "not a profile")
      _, err = run_child(dir) # no stop: the at_exit hook stops and writes the page
      page = File.join(dir, "flamegraph.html")
      assert File.exist?(page), "no page: #{Dir.children(dir).inspect}; stderr: #{err}"
      assert named?(page_names(page), "report_hot_work"), "the page names the hot method"
      refute_match(/cannot write the flame graph/, err)
    end
  end

  def test_stop_logs_a_page_it_cannot_write_and_returns
    Dir.mktmpdir do |dir|
      Dir.mkdir(File.join(dir, "flamegraph.html")) # where the page should go
      out, err = run_child(dir, "p Pyroscope.stop\n")
      assert_equal "true\n", out
      assert_match(/pyroscope ERROR: cannot write the flame graph: .*flamegraph\.html/, err) # the core's log
    end
  end

  def test_write_report_filters_groups_and_names_bad_options
    Dir.mktmpdir do |dir|
      run_child(dir, "Pyroscope.stop\n")
      r = Pyroscope.write_report(dir, filter: { phase: "hot" }, group_by: "phase", top: 50, output: nil)
      assert_nil r[:output]
      assert_equal "cpu", r[:type]
      assert_operator r[:profiles], :>, 0
      assert_match(/by phase/, r[:text])
      assert_match(/report_hot_work/, r[:text])
      none = Pyroscope.write_report(dir, filter: ["phase=cold"], output: nil)
      refute_match(/report_hot_work/, none[:text])

      out = File.join(dir, "custom.html")
      assert_equal out, Pyroscope.write_report(dir, output: out, top: 0)[:output]
      assert named?(page_names(out), "report_hot_work")

      e = assert_raises(Pyroscope::ReportError) { Pyroscope.write_report(dir, filter: ["phase"]) }
      assert_match(/filter: expected KEY=VALUE, got "phase"/, e.message)
      e = assert_raises(Pyroscope::ReportError) { Pyroscope.write_report(dir, type: "wall") }
      assert_match(/no wall profiles/, e.message)
      e = assert_raises(Pyroscope::ReportError) { Pyroscope.write_report(dir, colour: "red") }
      assert_match(/unknown option colour/, e.message)
      e = assert_raises(Pyroscope::ReportError) { Pyroscope.write_report(File.join(dir, "nothing")) }
      assert_match(/nothing: no such file or folder/, e.message)
      bad = File.join(dir, "bad-cpu-1-2.pb.gz")
      File.write(bad, "not a profile")
      e = assert_raises(Pyroscope::Native::Error) { Pyroscope.write_report(bad, output: nil) }
      assert_match(/bad-cpu-1-2\.pb\.gz/, e.message)
    end
  end

  # The gem's CLI is the core's report command: its messages name the flag,
  # --diff alone compares two paths, an unreadable profile exits 1.
  def cli(*argv)
    require "pyroscope/cli"
    out = StringIO.new
    err = StringIO.new
    [Pyroscope::CLI.run(argv, out: out, err: err), out.string, err.string]
  end

  def test_cli_is_the_cores_report_command
    Dir.mktmpdir do |dir|
      run_child(dir, "Pyroscope.stop\n")
      page = File.join(dir, "cli.html")
      code, out, err = cli("report", dir, "--top", "50", "-o", page)
      assert_equal [0, ""], [code, err]
      assert_match(/report_hot_work/, out)
      assert_match(/^\d+ profiles? read, flame graph: #{Regexp.escape(page)}$/, out)
      code, out, = cli("report", dir, dir, "--diff", "-o", page)
      assert_equal 0, code
      assert_match(/^A: source=#{Regexp.escape(dir)} \(total/, out)
      usage = "\nusage: pyroscope-native report PATH..."
      { ["--filter", "phase"] => '--filter: expected KEY=VALUE, got "phase"',
        ["--top", "-1"] => '--top: "-1" is not a whole number >= 0',
        ["--diff", "route"] => "--diff: takes two selections" }.each do |args, message|
        code, out, err = cli("report", dir, *args)
        assert_equal [2, ""], [code, out], err
        assert err.start_with?("pyroscope-native: #{message}"), err
        assert_includes err, usage
      end
      code, out, = cli("--help")
      assert_equal 0, code
      assert out.start_with?("usage: pyroscope-native report PATH..."), out
      code, _, err = cli("bogus")
      assert_equal [2, true], [code, err.start_with?("pyroscope-native: unknown command \"bogus\"#{usage}")], err
      bad = File.join(dir, "bad-cpu-1-2.pb.gz")
      File.write(bad, "not a profile")
      code, _, err = cli("report", bad, "-o", page)
      assert_equal 1, code
      assert_match(/\Apyroscope-native: .*bad-cpu-1-2\.pb\.gz/, err)
      refute_includes err, "usage:"
    end
  end
end
