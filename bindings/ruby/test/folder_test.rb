# frozen_string_literal: true

require_relative "test_helper"

# Profiles written to a folder (output_dir), decoded with go tool pprof:
# names, types, static tags, pid/thread labels, and labels per Fiber.
class FolderTest < Minitest::Test
  include PyroscopeTest

  def test_folder_profile
    Dir.mktmpdir do |dir|
      code = burn_source("folder_work") + <<~RUBY
        Pyroscope.configure do |c|
          c.application_name = "folder.rb"
          c.output_dir = #{dir.inspect}
          c.tags = { "deploy" => "blue" }
          c.report_pid = true
          c.report_thread_id = true
          c.sample_rate = 100
          c.sampler_cpu_budget = 0 # the configured rate, however loaded the machine
        end
        folder_work(0.4)
        Pyroscope.stop
        puts [Process.pid, Pyroscope.thread_id].join(" ")
      RUBY
      out, err, status = ruby_child(code)
      assert status.success?, err
      pid, tid = out.split
      names = Dir.children(dir).sort
      refute_empty names
      names.each { |n| assert_match(/\Afolder\.rb-cpu-\d+-\d+(\.\d+)?(-\d+)?\.pb\.gz\z/, n) }
      profiles = folder_profiles(dir)
      assert_equal %w[cpu nanoseconds], profiles.first.period_type
      assert_equal 10_000_000, profiles.first.period
      work = profiles.flat_map(&:samples).select { |s| s.stack.any? { |f| f.include?("folder_work") } }
      refute_empty work, "no sample in folder_work"
      assert_operator work.sum { |s| s.values.first }, :>=, 0.15e9
      work.each do |s|
        assert_equal "blue", s.labels["deploy"]
        assert_equal pid, s.labels["pid"]
        assert_equal tid, s.labels["thread_id"]
      end
      # The method's name as Ruby shows it, the leaf first.
      assert(work.any? { |s| s.stack.first.include?("folder_work") })
    end
  end

  # Two Fibers on one thread, switching back and forth, each under its own
  # labels: the samples of each Fiber's work carry that Fiber's labels.
  def test_labels_follow_the_running_fiber
    Dir.mktmpdir do |dir|
      code = burn_source("fiber_one_work") + burn_source("fiber_two_work") + <<~RUBY
        Pyroscope.configure do |c|
          c.application_name = "fibers.rb"
          c.output_dir = #{dir.inspect}
          c.sample_rate = 250
          c.sampler_cpu_budget = 0
        end
        one = Fiber.new { Pyroscope.tag_wrapper(fiber: "one") { loop { fiber_one_work(0.02); Fiber.yield } } }
        two = Fiber.new { Pyroscope.tag_wrapper(fiber: "two") { loop { fiber_two_work(0.02); Fiber.yield } } }
        Pyroscope.tag_wrapper(fiber: "root") { 20.times { one.resume; two.resume } }
        Pyroscope.stop
      RUBY
      _, err, status = ruby_child(code)
      assert status.success?, err
      profiles = folder_profiles(dir)
      one = value_by_label(profiles, "fiber_one_work", "fiber")
      two = value_by_label(profiles, "fiber_two_work", "fiber")
      # 0.4 s of CPU each. A sample taken between a switch and the switch
      # hook may carry the other label: allow a few percent, never most.
      assert_operator one["one"], :>=, 0.15e9, one.inspect
      assert_operator two["two"], :>=, 0.15e9, two.inspect
      assert_operator one["one"], :>=, 0.95 * one.values.sum, one.inspect
      assert_operator two["two"], :>=, 0.95 * two.values.sum, two.inspect
    end
  end
end
