# frozen_string_literal: true

require_relative "test_helper"

# tag_wrapper: the block's value, labels of the current Fiber only, restored
# on exceptions and when nested; it works without configure.
class TagWrapperTest < Minitest::Test
  include PyroscopeTest

  def labels
    Pyroscope::Native.labels_current
  end

  def test_yields_and_returns_the_value_without_configure
    refute Pyroscope.running?
    value = Pyroscope.tag_wrapper({ "k" => "v" }) { labels }
    assert_equal({ "k" => "v" }, value)
    assert_equal({}, labels)
    assert_nil(Pyroscope.tag_wrapper({ "k" => "v" }) { nil })
  end

  def test_keys_and_values_converted_with_to_s
    seen = Pyroscope.tag_wrapper(controller: :users, id: 42, ratio: 1.5) { labels }
    assert_equal({ "controller" => "users", "id" => "42", "ratio" => "1.5" }, seen)
  end

  def test_restored_on_exception
    Pyroscope.tag_wrapper("outer" => "1") do
      assert_raises(RuntimeError) do
        Pyroscope.tag_wrapper("inner" => "2") { raise "boom" }
      end
      assert_equal({ "outer" => "1" }, labels)
      # throw and break leave through ensure too
      catch(:out) { Pyroscope.tag_wrapper("inner" => "3") { throw :out } }
      [1].each { Pyroscope.tag_wrapper("inner" => "4") { break } }
      assert_equal({ "outer" => "1" }, labels)
    end
    assert_equal({}, labels)
  end

  def test_nesting_restores_the_outer_value_of_a_key
    Pyroscope.tag_wrapper("region" => "eu", "a" => "1") do
      Pyroscope.tag_wrapper("region" => "us") do
        assert_equal({ "region" => "us", "a" => "1" }, labels)
      end
      assert_equal({ "region" => "eu", "a" => "1" }, labels)
    end
  end

  # Issue 28: what the pyroscope gem's users pass (current_user&.id, request
  # paths, symbols, numbers) never fails the block: fixed or dropped, counted.
  DROPIN_CASES = [
    # [tags given, labels the samples carry]
    [{ "user" => nil }, {}],
    [{ "user" => "" }, {}],
    [{ "path" => "/a?b=c,d{e}" }, { "path" => "/a?b=c,d{e}" }],
    [{ "user-id" => 7 }, { "user_id" => "7" }],
    [{ "__reserved" => "x" }, { "_reserved" => "x" }],
    [{ "with space" => "x" }, { "with_space" => "x" }],
    [{ "1digit" => "x" }, { "_1digit" => "x" }],
    [{ "" => "x" }, {}],
    [{ "k" => "a\0b" }, { "k" => "a\uFFFDb" }],
    [{ "k" => "caf\xE9".b }, { "k" => "caf\uFFFD" }],
    [{ "k" => "caf\xE9".dup.force_encoding("ISO-8859-1") }, { "k" => "café" }],
    [{ "long" => "x" * 3000 }, { "long" => "x" * 2048 }],
    [{ "ok" => true, sym: :v }, { "ok" => "true", "sym" => "v" }],
    [nil, {}],
    ["k=v", {}],
  ].freeze

  def test_tags_never_raise_fixed_or_dropped_and_counted
    before = Pyroscope.stats
    DROPIN_CASES.each do |given, want|
      ran = false
      seen = Pyroscope.tag_wrapper(given) { ran = true; labels }
      assert ran, given.inspect
      assert_equal want, seen, given.inspect
      assert Pyroscope._add_tags(given)
      assert_equal want, labels, "_add_tags(#{given.inspect})"
      assert Pyroscope._remove_tags(given) if given.is_a?(Hash)
      assert_equal({}, labels, "_remove_tags(#{given.inspect})")
    end
    many = (1..120).to_h { |i| ["k#{i}", "v"] }
    assert_equal 100, Pyroscope.tag_wrapper(many) { labels }.size
    after = Pyroscope.stats
    assert_operator after["labels_coerced"] - before["labels_coerced"], :>=, 2 * 7
    assert_operator after["labels_dropped"] - before["labels_dropped"], :>=, 2 * 5 + 20
  end

  def test_strict_labels_raise_before_the_block_runs
    Dir.mktmpdir do |dir|
      configure_to(dir, "strict.rb", strict_labels: true)
      ran = false
      ["__reserved", "with space", "", "1digit"].each do |key|
        err = assert_raises(Pyroscope::ConfigError, key) { Pyroscope.tag_wrapper(key => "v") { ran = true } }
        assert_kind_of ArgumentError, err
      end
      assert_raises(Pyroscope::ConfigError) { Pyroscope.tag_wrapper("k" => nil) { ran = true } }
      err = assert_raises(Pyroscope::ConfigError) { Pyroscope.tag_wrapper("k" => "a\0b") { ran = true } }
      assert_match(/must not contain a NUL byte/, err.message)
      err = assert_raises(Pyroscope::ConfigError) { Pyroscope.tag_wrapper(nil) { ran = true } }
      assert_match(/tags must be a Hash/, err.message)
      refute ran
      assert_equal({ "k" => "a,b" }, Pyroscope.tag_wrapper("k" => "a,b") { labels })
      assert_equal({}, labels)
      assert_raises(ArgumentError) { Pyroscope.tag_wrapper("k" => "v") }
    ensure
      Pyroscope.stop
    end
  end

  def test_labels_belong_to_the_fiber
    Pyroscope.tag_wrapper("where" => "root") do
      inner = Fiber.new do
        seen = [labels]
        Pyroscope.tag_wrapper("where" => "fiber") do
          Fiber.yield(:paused)
          seen << labels
        end
        seen << labels
      end
      assert_equal :paused, inner.resume
      assert_equal({ "where" => "root" }, labels, "the fiber's labels stay in the fiber")
      seen = inner.resume
      # born with its creator's labels (issue 28: it started unlabelled)
      assert_equal [{ "where" => "root" }, { "where" => "fiber" }, { "where" => "root" }], seen
      assert_equal({ "where" => "root" }, labels)
    end
  end

  # A Fiber created inside tag_wrapper keeps the creator's labels as they
  # were at its creation, whoever resumes it later; one created outside
  # any starts with none.
  def test_a_fiber_inherits_its_creators_labels_at_creation
    made = Pyroscope.tag_wrapper("req" => "1") { Fiber.new { labels } }
    plain = Fiber.new { labels }
    Pyroscope.tag_wrapper("req" => "2") do
      assert_equal({ "req" => "1" }, made.resume)
      assert_equal({}, plain.resume)
    end
    lazy = Pyroscope.tag_wrapper("req" => "3") { Fiber.new(blocking: false) { |a, b| [labels, a + b] } }
    assert_equal [{ "req" => "3" }, 5], lazy.resume(2, 3)
  end

  def test_enumerator_next_runs_in_its_own_fiber_with_the_callers_labels
    enum = Enumerator.new do |y|
      y << labels
      Pyroscope.tag_wrapper("gen" => "1") { y << labels }
      y << labels
    end
    Pyroscope.tag_wrapper("main" => "1") do
      # its Fiber starts with the labels of the caller of next (issue 28: none)
      assert_equal({ "main" => "1" }, enum.peek)
      assert_equal({ "main" => "1" }, enum.next)
      assert_equal({ "main" => "1", "gen" => "1" }, enum.next)
      assert_equal({ "main" => "1" }, labels)
      assert_equal({ "main" => "1" }, enum.next)
    end
    assert_equal({}, labels)
    assert_equal({}, [1].each.next.then { labels })
  end

  def test_labels_belong_to_the_thread
    gate = Queue.new
    done = Queue.new
    other = Thread.new do
      Pyroscope.tag_wrapper("who" => "other") do
        gate.pop
        done << labels
      end
    end
    Pyroscope.tag_wrapper("who" => "main") do
      gate << :go
      assert_equal({ "who" => "other" }, done.pop)
      assert_equal({ "who" => "main" }, labels)
    end
    other.join
  end

  # The deprecated calls only warn, as in the pyroscope gem.
  def test_tag_and_remove_tags_warn
    _, err = capture_io do
      assert_nil Pyroscope.tag("a" => "b")
      Pyroscope.remove_tags("a")
    end
    assert_equal 2, err.scan("deprecated. Use `Pyroscope.tag_wrapper` instead.").size
    assert_equal({}, labels)
  end
end
