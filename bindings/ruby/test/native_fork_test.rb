# frozen_string_literal: true

require_relative "native_helper"

# A forked child (a Puma/Unicorn worker) profiles itself without configure
# being called again, its profiles labelled with its own pid; the parent
# goes on unaffected.
class NativeForkTest < Minitest::Test
  include NativeHelper
  N = Pyroscope::Native

  def parent_work(s) = burn(s)
  def child_work(s) = burn(s)

  def test_fork_child_profiles_itself_with_its_pid
    Dir.mktmpdir do |dir|
      N.start(settings(dir), {})
      N.labels_push({"role" => "app"})
      parent_work(0.2)
      rd, wr = IO.pipe
      pid = fork do
        rd.close
        running = N.running?
        child_work(0.6)
        st = N.stop
        wr.puts [running, st["captured"]].inspect
        wr.close
        exit!(0)
      end
      wr.close
      parent_work(0.6)
      child_report = rd.read
      _, status = Process.wait2(pid)
      assert status.success?, child_report
      running, child_captured = eval(child_report) # rubocop:disable Security/Eval
      assert running, "the child's profiler is not running"
      assert_operator child_captured, :>, 10, child_report
      assert N.running?
      stats = N.stop
      samples = decode_dir(dir)
      child = samples.select { |s| s.stack.any? { |f| f.include?("child_work") } }
      parent = samples.select { |s| s.stack.any? { |f| f.include?("parent_work") } }
      assert_operator child.sum(&:count), :>=, 10, stats.inspect
      assert_operator parent.sum(&:count), :>=, 20, stats.inspect
      assert(child.all? { |s| s.labels["pid"] == pid.to_s }, child.map(&:labels).uniq.inspect)
      # The Fiber's labels survived the fork.
      assert(child.all? { |s| s.labels["role"] == "app" }, child.map(&:labels).uniq.inspect)
      # The parent (report_pid off) carries no pid, and none of the child's.
      assert(parent.none? { |s| s.labels.key?("pid") }, parent.map(&:labels).uniq.inspect)
      # The child's files and the parent's are distinct profiles: the
      # parent's own time is all there (about 0.8 s of CPU).
      assert_operator charged(parent, "parent_work") / 1e9, :>, 0.5
      N.labels_restore(nil)
    end
  end
end
