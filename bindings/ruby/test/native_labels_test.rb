# frozen_string_literal: true

require_relative "native_helper"
require "pyroscope" # lib/pyroscope/fiber_inherit.rb: new Fibers take their creator's labels

# Labels per thread and per Fiber, as the sampler sees them, and the
# push/restore/remove semantics tag_wrapper is built on.
class NativeLabelsTest < Minitest::Test
  include NativeHelper
  N = Pyroscope::Native

  def work_red(s) = burn(s)
  def work_blue(s) = burn(s)
  def fiber_left(s) = burn(s)
  def fiber_right(s) = burn(s)
  def born_in_fiber(s) = burn(s)
  def born_in_enum(s) = burn(s)

  def test_labels_per_thread_and_per_fiber
    Dir.mktmpdir do |dir|
      N.start(settings(dir), {})
      threads = [["red", :work_red], ["blue", :work_blue]].map do |color, meth|
        Thread.new do
          N.labels_push({"color" => color})
          send(meth, 0.5)
        end
      end
      # Two Fibers on this thread, interleaved every ~5 ms of CPU, each
      # with its own label.
      fibers = [["left", :fiber_left], ["right", :fiber_right]].map do |side, meth|
        Fiber.new do
          N.labels_push({"side" => side})
          60.times { send(meth, 0.005); Fiber.yield }
          :done
        end
      end
      60.times { fibers.each(&:resume) }
      threads.each(&:join)
      stats = N.stop
      samples = decode_dir(dir)
      msg = "stats #{stats.inspect}"
      {"work_red" => ["color", "red"], "work_blue" => ["color", "blue"],
       "fiber_left" => ["side", "left"], "fiber_right" => ["side", "right"]}.each do |meth, (k, v)|
        mine = samples.select { |s| s.stack.any? { |f| f.include?(meth) } }
        assert_operator mine.sum(&:count), :>=, 5, "#{meth}: #{msg}"
        wrong = mine.reject { |s| s.labels[k] == v }
        assert_empty wrong.map(&:labels), "#{meth} charged to other labels"
        # Nothing of one fiber/thread carries the other's label.
        other = %w[color side].find { |x| x != k }
        assert(mine.none? { |s| s.labels.key?(other) }, "#{meth} carries #{other}")
      end
      # This thread's root fiber never set labels.
      assert_equal({}, N.labels_current)
    end
  end

  # Issue 28: a Fiber created inside tag_wrapper (Fiber.new, the Fiber of
  # Enumerator#next) was sampled unlabelled; it carries its creator's labels.
  def test_fibers_created_inside_tag_wrapper_are_sampled_with_its_labels
    Dir.mktmpdir do |dir|
      N.start(settings(dir), {})
      Pyroscope.tag_wrapper("req" => "r1") do
        Fiber.new { born_in_fiber(0.4) }.resume
        enum = Enumerator.new { |y| 4.times { born_in_enum(0.1); y << 1 } }
        4.times { enum.next }
      end
      stats = N.stop
      samples = decode_dir(dir)
      %w[born_in_fiber born_in_enum].each do |meth|
        mine = samples.select { |s| s.stack.any? { |f| f.include?(meth) } }
        assert_operator mine.sum(&:count), :>=, 5, "#{meth}: stats #{stats.inspect}"
        assert_empty mine.reject { |s| s.labels["req"] == "r1" }.map(&:labels), "#{meth} not labelled"
      end
    end
  end

  def test_push_restore_nested_and_exceptions
    assert_equal({}, N.labels_current)
    t1 = N.labels_push({"a" => "1"})
    assert_nil t1
    t2 = N.labels_push({"b" => "2", "a" => "x"})
    assert_equal({"a" => "x", "b" => "2"}, N.labels_current)
    begin
      t3 = N.labels_push({"c" => "3"})
      raise "boom"
    rescue RuntimeError
      N.labels_restore(t3)
    end
    assert_equal({"a" => "x", "b" => "2"}, N.labels_current)
    N.labels_remove({"b" => "other"}) # value differs: kept
    assert_equal({"a" => "x", "b" => "2"}, N.labels_current)
    N.labels_remove({"b" => "2"})
    assert_equal({"a" => "x"}, N.labels_current)
    N.labels_restore(t2)
    assert_equal({"a" => "1"}, N.labels_current)
    # Out of order: restoring an older token is allowed (interleaved fibers).
    N.labels_restore(t1)
    assert_equal({}, N.labels_current)
    # A new thread starts without labels; a new Fiber with its creator's.
    N.labels_push({"z" => "1"})
    assert_equal({}, Thread.new { N.labels_current }.value)
    assert_equal({"z" => "1"}, Fiber.new { N.labels_current }.resume)
    assert_equal({"z" => "1"}, N.labels_current)
    N.labels_restore(nil)
  end

  def test_bad_labels_fixed_or_named
    token = N.labels_push({"__reserved" => "v", "ok" => "a,b"}) # fixed (strict off)
    assert_equal({"_reserved" => "v", "ok" => "a,b"}, N.labels_current)
    N.labels_restore(token)
    e = assert_raises(Pyroscope::ConfigError) { N.labels_push({"k" => 1}) } # lib converts types
    assert_match(/k/, e.message)
    assert_raises(TypeError) { N.labels_restore("not a token") }
    assert_equal({}, N.labels_current)
  end

  def named_work(s) = burn(s)

  # report_thread_name / report_thread_id: the Ruby thread's name (set after
  # it started) and its kernel tid on its samples.
  def test_thread_name_and_id_labels
    Dir.mktmpdir do |dir|
      N.start(settings(dir, report_thread_name: true, report_thread_id: true), {})
      t = Thread.new do
        Thread.current.name = "worker-7"
        named_work(0.3)
        N.thread_id
      end
      tid = t.value
      stats = N.stop
      mine = decode_dir(dir).select { |s| s.stack.any? { |f| f.include?("named_work") } }
      assert_operator mine.sum(&:count), :>=, 5, stats.inspect
      # The first capture may come before the name was read.
      named = mine.select { |s| s.labels["thread_name"] == "worker-7" }
      assert_operator named.sum(&:count), :>=, mine.sum(&:count) - 2, mine.map(&:labels).uniq.inspect
      assert(mine.all? { |s| s.labels["thread_id"] == tid.to_s }, mine.map(&:labels).uniq.inspect)
    end
  end
end
