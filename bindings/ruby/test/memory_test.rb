# frozen_string_literal: true

require_relative "test_helper"

# Memory profiles (memory: true): sampled allocations and the sampled live
# heap from the VM's NEWOBJ/FREEOBJ events, by function, label and span,
# written to a folder and decoded with go tool pprof. Each object counts as
# one heap base slot (GC::INTERNAL_CONSTANTS' BASE_SLOT_SIZE/RVALUE_SIZE).
class MemoryTest < Minitest::Test
  include PyroscopeTest

  SPAN = "00f067aa0ba902b7"
  TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
  CHURN = 1_500_000
  KEEP = 400_000
  # The workload: CHURN objects made and dropped under phase=churn (and a
  # span, through Pyroscope::Otel::SpanProcessor), KEEP objects kept under phase=keep; then a period cut after a
  # GC (profile 1), the kept ones dropped, GC again, a few others made and
  # kept, another cut (profile 2).
  WORKLOAD = <<~RUBY
    def churn_work(n) = n.times { Object.new }
    def keep_work(n) = Array.new(n) { Object.new }
    def anchor_work(n) = Array.new(n) { Object.new }
    slot = GC::INTERNAL_CONSTANTS[:BASE_SLOT_SIZE] || GC::INTERNAL_CONSTANTS[:RVALUE_SIZE]
    # A local root span as the OpenTelemetry SDK hands it to our span
    # processor (the SDK is not installable here; otel_test.rb says which
    # pieces of its interface these are).
    require "pyroscope/otel"
    SpanCtx = Struct.new(:trace_id, :span_id)
    Span = Struct.new(:name, :context, :parent_span_id, :attributes) do
      def set_attribute(key, value) = (attributes[key] = value) && self
    end
    processor = Pyroscope::Otel::SpanProcessor.new
    span = Span.new("churn", SpanCtx.new(["#{TRACE}"].pack("H*"), ["#{SPAN}"].pack("H*")), [0].pack("Q"), {})
    processor.on_start(span, nil)
    Pyroscope.tag_wrapper("phase" => "churn") { churn_work(#{CHURN}) }
    processor.on_finish(span)
    $kept = Pyroscope.tag_wrapper("phase" => "keep") { keep_work(#{KEEP}) }
    GC.start
    Pyroscope.flush
    $kept = nil
    4.times { GC.start }
    $anchor = anchor_work(50_000) # period 2 has samples of its own
    Pyroscope.flush
    st = Pyroscope.stats
    puts [slot, st["memory_sampled"], st["memory_freed"]].join(" ")
  RUBY

  def memory_profiles(profiles)
    profiles.select { |p| p.sample_types.first == %w[alloc_objects count] }
  end

  # The memory profiles in the order they were written (a period with no
  # sample writes none): names <app>-memory-<from>-<until>[-<n>].pb.gz.
  def memory_in_time_order(profiles, names)
    profiles.zip(names).filter_map do |prof, name|
      m = name.match(/-memory-(\d+)-(\d+)(?:-(\d+))?\.pb\.gz\z/)
      [[m[1].to_i, m[2].to_i, m[3].to_i], prof] if m
    end.sort_by(&:first).map(&:last)
  end

  # {label value => [alloc_objects, alloc_space, inuse_objects, inuse_space]}
  # of the samples whose stack holds `frame`.
  def by_label(profile, frame, key)
    out = Hash.new { |h, k| h[k] = [0, 0, 0, 0] }
    profile.samples.each do |s|
      next unless s.stack.any? { |f| f.include?(frame) }

      s.values.each_with_index { |v, i| out[s.labels[key]][i] += v }
    end
    out
  end

  def assert_near(want, got, what)
    assert_in_delta want, got, 0.1 * want, "#{what}: #{got} for a truth of #{want}"
  end

  def test_allocations_and_live_heap_by_function_label_and_span
    settings = "c.memory = true; c.memory_interval = 8192; c.upload_interval = 60"
    profiles, out, names = profile_child("mem.rb", WORKLOAD, settings: settings)
    slot, sampled, freed = out.split.map(&:to_i)
    assert_operator slot, :>=, 40
    assert_operator sampled, :>, 1000, out
    assert_operator freed, :>, 500, out
    mems = memory_in_time_order(profiles, names)
    # Period 1 is the one with the allocations; period 2 follows it.
    at = mems.index { |p| p.samples.any? { |s| s.stack.any? { |f| f.include?("churn_work") } } }
    refute_nil at, "no memory profile has churn_work: #{names.inspect}"
    first, second = mems[at], mems[at + 1]
    refute_nil second, "no memory profile after period 1: #{names.inspect}"
    assert_equal %w[alloc_objects count alloc_space bytes inuse_objects count inuse_space bytes],
                 first.sample_types.flatten

    churn = by_label(first, "churn_work", "phase")
    keep = by_label(first, "keep_work", "phase")
    assert_equal ["churn"], churn.keys, churn.inspect
    assert_equal ["keep"], keep.keys, keep.inspect
    if ENV["PN_TEST_VERBOSE"]
      warn "churn #{churn["churn"].inspect} keep #{keep["keep"].inspect} (truth #{CHURN}, #{KEEP} x #{slot} B)"
    end
    # Allocations: objects and bytes (a base slot each) within 10 %.
    assert_near CHURN, churn["churn"][0], "churn_work alloc_objects"
    assert_near CHURN * slot, churn["churn"][1], "churn_work alloc_space"
    assert_near KEEP, keep["keep"][0], "keep_work alloc_objects"
    assert_near KEEP * slot, keep["keep"][1], "keep_work alloc_space"
    # In use at the end of period 1 (after a GC): the kept objects only.
    assert_near KEEP, keep["keep"][2], "keep_work inuse_objects"
    assert_near KEEP * slot, keep["keep"][3], "keep_work inuse_space"
    assert_operator churn["churn"][2], :<, 0.02 * CHURN, "freed churn_work objects still in use"
    # The span's id rides on the churn samples, not on the others.
    first.samples.each do |s|
      next unless s.stack.any? { |f| f.include?("_work") }

      if s.stack.any? { |f| f.include?("churn_work") }
        assert_equal [SPAN, TRACE, "churn"], s.labels.values_at("span_id", "trace_id", "span_name")
      else
        assert_nil s.labels["span_id"]
      end
    end

    # Period 2: the kept objects were dropped and collected.
    kept_later = by_label(second, "keep_work", "phase")
    assert_operator kept_later["keep"][2], :<, 0.05 * KEEP, "dropped objects still in use: #{kept_later.inspect}"
    assert_equal 0, kept_later["keep"][0], "period 2 allocated nothing in keep_work"
  end

  # PYROSCOPE_MEMORY turns it on (the core reads the variable); without
  # it there is no memory profile.
  def test_variable_turns_it_on_and_it_is_off_by_default
    code = "Array.new(200_000) { Object.new }\nputs Pyroscope.stats['memory_sampled'].to_i\n"
    profiles, out, = profile_child("envmem.rb", code, env: { "PYROSCOPE_MEMORY" => "true",
                                                             "PYROSCOPE_MEMORY_INTERVAL" => "4096" })
    assert_operator out.to_i, :>, 100, out
    refute_empty memory_profiles(profiles)
    profiles, out, = profile_child("nomem.rb", code)
    assert_equal 0, out.to_i
    assert_empty memory_profiles(profiles)
    refute_empty profiles
  end

  # The hook is on only in short sampling windows: while a loop allocates
  # with memory profiling on at the default interval, the VM's hook list
  # (TracePoint.stat: active hooks) is nearly always what it is with memory
  # profiling off. (Permanent NEWOBJ/FREEOBJ hooks, the earlier design,
  # showed two more hooks at every look: every allocation took the VM's
  # slow path.)
  def test_hook_is_on_only_in_sampling_windows
    code = <<~RUBY
      def active = TracePoint.stat.values.sum { |v| v[0] }
      def looks(n)
        Array.new(n) { 50.times { [Object.new, "x" * 3] }; active }
      end
      with_memory = looks(3000)
      st = Pyroscope.stats
      Pyroscope.stop
      Pyroscope.configure { |c| c.application_name = "hooks.rb"; c.output_dir = Dir.mktmpdir }
      without = looks(300).min
      over = with_memory.count { |n| n > without }
      puts "OVER \#{over} OF \#{with_memory.size} WINDOWS \#{st['memory_windows']} SAMPLED \#{st['memory_sampled']}"
    RUBY
    _, out, = profile_child("hooks.rb", "require 'tmpdir'\n" + code, settings: "c.memory = true")
    over, looks = out[/OVER (\d+) OF (\d+)/, 1].to_i, out[/OF (\d+)/, 1].to_i
    assert_equal 3000, looks, out
    assert_operator out[/SAMPLED (\d+)/, 1].to_i, :>, 0, out
    assert_operator over, :<, looks / 10, out
  end

  # Hostile: allocation storms from many threads with a tiny table (full:
  # counted, weight kept), GC and compaction while samples wait to be named,
  # forks while threads allocate (the child profiles its own allocations),
  # stop and start again while threads allocate, a Ractor allocating beside
  # them. No crash, no hang.
  def test_storm_fork_and_shutdown_while_allocating
    code = <<~RUBY
      def storm_work(n) = n.times.map { |i| [i.to_s, Object.new] }.size
      stop = false
      threads = 8.times.map do |t|
        Thread.new do
          Pyroscope.tag_wrapper("t" => t.to_s) { storm_work(2000) until stop }
        end
      end
      gc = Thread.new { until stop; GC.start; GC.compact if GC.respond_to?(:compact); sleep 0.01; end }
      kids = 3.times.map do
        sleep 0.05
        fork do
          x = Array.new(50_000) { Object.new }
          st = Pyroscope.stats
          exit!(st["memory_sampled"].to_i > 0 && x.size == 50_000 ? 0 : 3)
        end
      end
      statuses = kids.map { |pid| Process.wait2(pid)[1] }
      puts "FORKS " + statuses.map { |s| s.exitstatus.to_s }.join(",")
      3.times do
        sleep 0.1
        Pyroscope.stop
        sleep 0.02
        Pyroscope.configure do |c|
          c.application_name = "storm.rb"; c.output_dir = ENV["OUT"]; c.memory = true
          c.memory_interval = 512; c.memory_max_live = 64
        end
      end
      sleep 0.2
      # Another Ractor allocating (its objects are not sampled; no crash).
      Warning[:experimental] = false
      r = Ractor.new { Array.new(100_000) { Object.new }.size }
      puts "RACTOR \#{r.respond_to?(:value) ? r.value : r.take}"
      st = Pyroscope.stats
      puts "SAMPLED \#{st['memory_sampled']} FULL \#{st['memory_table_full']}"
      stop = true
      threads.each(&:join)
      gc.join
    RUBY
    Dir.mktmpdir do |out_dir|
      settings = "c.memory = true; c.memory_interval = 512; c.memory_max_live = 64"
      profiles, out, = profile_child("storm.rb", code, settings: settings, env: { "OUT" => out_dir })
      assert_match(/^FORKS 0,0,0$/, out)
      assert_match(/^RACTOR 100000$/, out)
      sampled, full = out[/SAMPLED (\d+) FULL (\d+)/, 1].to_i, out[/FULL (\d+)/, 1].to_i
      assert_operator sampled, :>, 100, out
      assert_operator full, :>, 0, out
      refute_empty memory_profiles(profiles)
      refute_empty Dir.children(out_dir).grep(/memory/), "the restarted agent wrote no memory profile"
    end
  end
end
