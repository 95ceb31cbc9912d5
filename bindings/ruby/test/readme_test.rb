# frozen_string_literal: true

require "tmpdir"
require_relative "test_helper"

# The README's Ruby snippets run as pasted: each ```ruby block is taken from
# README.md itself (so the two cannot drift) and run with this Ruby and the
# installed gem in an empty folder; the gem's report command reads what the
# snippet wrote.
class ReadmeTest < Minitest::Test
  include PyroscopeTest

  README = File.expand_path("../../../README.md", __dir__)
  BLOCKS = File.read(README).scan(/^```ruby\n(.*?)^```/m).map(&:first)

  def test_the_readme_has_ruby_snippets
    assert_operator BLOCKS.size, :>=, 1
  end

  BLOCKS.each_with_index do |code, n|
    define_method("test_ruby_block_#{n + 1}_runs_as_pasted") do
      Dir.mktmpdir do |dir|
        env = ENV.keys.select { |k| k.start_with?("PYROSCOPE_", "OTEL_") }.to_h { |k| [k, nil] }
        out, err, status = Open3.capture3(env, RbConfig.ruby, "-e", code, chdir: dir)
        assert status.success?, "block #{n + 1}:\n#{code}\nstdout: #{out}\nstderr: #{err}"
        folder = code[/c\.output_dir = "([^"]+)"/, 1]
        next unless folder

        assert Dir.glob(File.join(dir, folder, "*.pb.gz")).any?, "no profiles in #{folder}"
        # The gem's report command, as a user runs it on that folder.
        exe = Gem.bin_path("pyroscope-native", "pyroscope-native")
        out, err, status = Open3.capture3(env, RbConfig.ruby, exe, "report", folder, "--top", "5",
                                          "--group-by", "endpoint", chdir: dir)
        assert status.success?, "report: #{err}"
        assert_match(/checkout/, out)
        assert_match(/1 profile read|\d+ profiles read/, out)
        assert_match(/flame graph: #{Regexp.escape(folder)}/, out)
      end
    end
  end

  def test_report_command_usage_errors_exit_2
    exe = Gem.bin_path("pyroscope-native", "pyroscope-native")
    _, err, status = Open3.capture3(RbConfig.ruby, exe, "report")
    assert_equal 2, status.exitstatus, err
    assert_match(/usage: pyroscope-native report/, err)
    _, err, status = Open3.capture3(RbConfig.ruby, exe, "report", "nowhere", "--diff", "a=1")
    assert_equal 2, status.exitstatus, err
  end
end
