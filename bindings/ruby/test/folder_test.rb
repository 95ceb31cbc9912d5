# frozen_string_literal: true

require_relative "test_helper"

# Profiles written to a folder (output_dir), decoded with go tool pprof:
# names, types, static tags, pid/thread labels, and labels per Fiber.
class FolderTest < Minitest::Test
  include PyroscopeTest

  def test_folder_profile
    code = burn_source("folder_work") + <<~RUBY
      folder_work(0.4)
      puts [Process.pid, Pyroscope.thread_id].join(" ")
    RUBY
    settings = 'c.tags = { "deploy" => "blue" }; c.report_pid = true; c.report_thread_id = true'
    profiles, out, names = profile_child("folder.rb", code, settings: settings)
    pid, tid = out.split
    refute_empty names
    names.each { |n| assert_match(/\Afolder\.rb-cpu-\d+-\d+(\.\d+)?(-\d+)?\.pb\.gz\z/, n) }
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
    # Names as Ruby shows them, the leaf first: folder_work before <main>.
    work.each do |s|
      names = s.stack
      assert_operator names.index { |f| f.include?("Object#folder_work") }, :<, names.index("<main>"), names.inspect
    end
  end

  # Two Fibers on one thread, switching back and forth, each under its own
  # labels: the samples of each Fiber's work carry that Fiber's labels.
  def test_labels_follow_the_running_fiber
    code = burn_source("fiber_one_work") + burn_source("fiber_two_work") + <<~RUBY
      one = Fiber.new { Pyroscope.tag_wrapper(fiber: "one") { loop { fiber_one_work(0.02); Fiber.yield } } }
      two = Fiber.new { Pyroscope.tag_wrapper(fiber: "two") { loop { fiber_two_work(0.02); Fiber.yield } } }
      Pyroscope.tag_wrapper(fiber: "root") { 20.times { one.resume; two.resume } }
    RUBY
    profiles, = profile_child("fibers.rb", code, rate: 250)
    one = value_by_label(profiles, "fiber_one_work", "fiber")
    two = value_by_label(profiles, "fiber_two_work", "fiber")
    # 0.4 s of CPU each. A sample taken between a switch and the switch
    # hook may carry the other label: allow a few percent, never most.
    assert_operator one["one"], :>=, 0.15e9, one.inspect
    assert_operator two["two"], :>=, 0.15e9, two.inspect
    assert_operator one["one"], :>=, 0.95 * one.values.sum, one.inspect
    assert_operator two["two"], :>=, 0.95 * two.values.sum, two.inspect
  end

  # report_thread_name through Pyroscope.configure, and through its
  # variable: the samples of a named thread's work carry its name; unset,
  # none carries a thread_name label.
  def test_report_thread_name
    code = burn_source("named_lane_work") + <<~RUBY
      Thread.new { Thread.current.name = "lane-b"; named_lane_work(0.3) }.join
    RUBY
    [[{}, "c.report_thread_name = true"], [{"PYROSCOPE_REPORT_THREAD_NAME" => "true"}, ""]].each do |env, setting|
      profiles, = profile_child("names.rb", code, settings: setting, env: env)
      names = value_by_label(profiles, "named_lane_work", "thread_name")
      assert_operator names["lane-b"], :>=, 0.1e9, [env, setting, names].inspect
      # The first capture may come before the job read the name.
      assert_operator names["lane-b"], :>=, 0.9 * names.values.sum, [env, setting, names].inspect
    end
    profiles, = profile_child("names.rb", code)
    names = value_by_label(profiles, "named_lane_work", "thread_name")
    assert_equal [nil], names.keys, "thread_name without report_thread_name"
  end

  # oncpu = false: a wall profile, where a sleeping thread is seen too.
  def test_wall_mode
    code = <<~RUBY
      def sleeper = sleep(0.5)
      Thread.new { Pyroscope.tag_wrapper(role: "sleeper") { sleeper } }.join
    RUBY
    profiles, _, names = profile_child("wall.rb", code, settings: "c.oncpu = false")
    assert(names.all? { |n| n.start_with?("wall.rb-wall-") }, names.inspect)
    assert_equal %w[wall nanoseconds], profiles.first.period_type
    slept = value_by_label(profiles, "sleeper", "role")
    assert_equal ["sleeper"], slept.keys
    assert_operator slept["sleeper"], :>=, 0.2e9, "0.5 s of sleep, sampled in wall time"
  end

  # A program that never calls stop still writes its last period: stop runs
  # at exit.
  def test_exit_writes_the_last_period
    Dir.mktmpdir do |dir|
      code = burn_source("exit_work") + <<~RUBY
        Pyroscope.configure do |c|
          c.application_name = "exit.rb"
          c.output_dir = #{dir.inspect}
          c.upload_interval = 600
        end
        exit_work(0.2)
      RUBY
      _, err, status = ruby_child(code)
      assert status.success?, err
      work = value_by_label(folder_profiles(dir), "exit_work", "none")
      assert_operator work[nil], :>, 0, "the last period was not written at exit"
    end
  end
end
