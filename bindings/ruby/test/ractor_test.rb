# frozen_string_literal: true

require_relative "test_helper"

# The gem in a process that runs Ractors. The methods it prepends to core
# classes (Fiber.new, Enumerator#next, exec, Ractor.new) and tag_wrapper run
# in every Ractor but call the extension only from the main one: elsewhere
# they did raise (Ractor::UnsafeError, or "defined with an un-shareable Proc"
# from define_method) where plain Ruby works. Before Ruby 3.3 the memory
# profile's object hooks must be off whenever a Ractor may start one.
class RactorTest < Minitest::Test
  include PyroscopeTest

  OLD_RUBY = Gem::Version.new(RUBY_VERSION) < Gem::Version.new("3.3")

  # Core methods used inside Ractors; each prints its result.
  IN_RACTORS = <<~RUBY
    Warning[:experimental] = false
    puts Ractor.new { Fiber.new { 1 }.resume }.take
    puts Ractor.new { [2, 3].each.next }.take
    puts Ractor.new { begin; exec("/nonexistent-x"); rescue SystemCallError => e; e.class.name; end }.take
    puts Ractor.new { Ractor.new { 4 }.take }.take
    puts Ractor.new { Pyroscope.tag_wrapper("k" => "v") { 5 } }.take
  RUBY
  IN_RACTORS_OUT = %w[1 2 Errno::ENOENT 4 5].freeze

  # Fails on main 22d789e (Ruby 3.1 and 3.4): the first Ractor raises.
  def test_core_methods_inside_ractors_with_the_gem_required
    out, err, status = ruby_child(IN_RACTORS)
    assert status.success?, err
    assert_equal IN_RACTORS_OUT, out.split
  end

  # The same with the profiler running; in the main Ractor a Fiber still
  # takes its creator's labels, and Ractor.new works in a trap handler (where
  # a Mutex cannot be locked).
  def test_core_methods_inside_ractors_while_profiling
    Dir.mktmpdir do |dir|
      code = <<~RUBY
        Pyroscope.configure { |c| c.application_name = "ractors.rb"; c.output_dir = ARGV[0] }
        #{IN_RACTORS}
        Pyroscope.tag_wrapper("k" => "main") do
          puts Fiber.new { Pyroscope::Native.labels_current.to_a.inspect }.resume
        end
        trap("USR1") { $r = Ractor.new { 6 } }
        Process.kill(:USR1, $$)
        sleep 0.01 until $r
        puts $r.take
        puts "RUNNING \#{Pyroscope.running?}"
        Pyroscope.stop
      RUBY
      out, err, status = ruby_child(code, args: [dir])
      assert status.success?, err
      lines = out.lines.map(&:strip)
      assert_equal IN_RACTORS_OUT, lines.first(5)
      assert_includes lines[5], %w[k main].inspect, out
      assert_equal ["6", "RUNNING true"], lines[6, 2]
    end
  end

  # Ruby < 3.3: a memory profile started while a Ractor runs (by configure,
  # or again after a failed exec) would let that Ractor start one under the
  # object hooks and crash the VM; it starts off (logged), CPU goes on. 3.3+:
  # the memory profile stays on. Fails on main 22d789e (Ractor::UnsafeError
  # on < 3.3), and segfaulted with the guard only skipped outside the main
  # Ractor.
  def test_memory_profile_and_ractors_that_start_ractors
    Dir.mktmpdir do |dir|
      code = <<~RUBY
        Warning[:experimental] = false
        def start(dir) = Pyroscope.configure { |c| c.application_name = "ractors.rb"; c.output_dir = dir; c.memory = true }
        def memory? = Pyroscope.stats.key?("memory_sampled")
        start(ARGV[0])
        puts "MEMORY_ALONE \#{memory?}"
        r = Ractor.new do
          while Ractor.receive == :go
            Ractor.yield 20.times.sum { Ractor.new { Array.new(100) { Object.new }.size }.take }
          end
        end
        begin; exec("/nonexistent-x"); rescue SystemCallError; end
        r.send(:go); puts "NESTED \#{r.take}"
        start(ARGV[0])
        puts "MEMORY_BESIDE \#{memory?}"
        r.send(:go); puts "NESTED \#{r.take}"
        r.send(:done)
        puts "RUNNING \#{Pyroscope.running?}"
        Pyroscope.stop
      RUBY
      out, err, status = ruby_child(code, args: [dir])
      assert status.success?, "#{out}\n#{err}"
      assert_equal ["MEMORY_ALONE true", "NESTED 2000", "MEMORY_BESIDE #{!OLD_RUBY}", "NESTED 2000",
                    "RUNNING true"], out.lines.map(&:strip)
      assert_equal OLD_RUBY, err.include?("memory profile off: other Ractors run"), err
    end
  end
end
