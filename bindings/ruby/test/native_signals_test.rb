# frozen_string_literal: true

require_relative "native_helper"

# SIGPROF belongs to one profiler at a time, and never outlives exec. Each
# case runs in a child process: signal dispositions are per process.
class NativeSignalsTest < Minitest::Test
  include NativeHelper

  PROF_BIT = 1 << (Signal.list.fetch("PROF") - 1)

  def test_refuses_a_foreign_sigprof_handler
    out, st = run_ruby(<<~'RUBY')
      trap("PROF") { }
      try_start(dir)
      puts "RUNNING #{N.running?}"
      trap("PROF", "DEFAULT")
      N.start(settings(dir), {})
      puts "AFTER #{N.running?}"
      # Ours again: a second start after stop reinstalls nothing foreign.
      N.stop
      N.start(settings(dir), {})
      puts "AGAIN #{N.running?}"
      N.stop
    RUBY
    assert st.success?, out
    assert_match(/^REFUSED another SIGPROF handler is installed/, out)
    assert_match(/^RUNNING false/, out)
    assert_match(/^AFTER true/, out)
    assert_match(/^AGAIN true/, out)
  end

  # Issue 28: trap("PROF") after start silently ended profiling while the
  # app's handler ran on our signals. The sampler's housekeeping (1 Hz)
  # notices, logs once and counts; ours is not put back over the app's.
  def test_a_handler_replaced_after_start_is_noticed_logged_once_and_counted
    out, st = run_ruby(<<~'RUBY')
      require "logger"
      require "pyroscope"
      Pyroscope.logger = Logger.new($stdout)
      Pyroscope.configure do |c|
        c.application_name = "trap.rb"
        c.output_dir = dir
        c.upload_interval = 60
        c.log_level = "error"
      end
      hits = 0
      trap("PROF") { hits += 1 }
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      x = 0
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 2.5
      ours = Pyroscope::Native.stats["sigprof_replaced"]
      # Once noticed, no more of our signals reach the app's handler (and
      # none could kill an app that resets SIGPROF to its default).
      before = hits
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1.0
      later = hits - before
      trap("PROF", "DEFAULT") # the app ends its use; ours stays off
      x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 1.5
      puts "REPLACED #{ours} HITS #{hits > 0} LATER #{later <= 1}"
      Pyroscope.stop
    RUBY
    assert st.success?, out
    assert_match(/^REPLACED 1 HITS true LATER true$/, out)
    assert_equal 1, out.scan(/SIGPROF handler was replaced/).size, out
  end

  def test_refuses_stackprof_and_starts_after_it_stopped
    begin
      require "stackprof"
    rescue LoadError
      skip "ruby-stackprof is not installed"
    end
    out, st = run_ruby(<<~'RUBY')
      require "stackprof"
      StackProf.start(mode: :cpu, interval: 1000)
      try_start(dir)
      StackProf.stop
      N.start(settings(dir), {})
      puts "AFTER #{N.running?}"
      N.stop
    RUBY
    assert st.success?, out
    assert_match(/^REFUSED .*stackprof/, out)
    assert_match(/^AFTER true/, out)
  end

  # A SIGPROF on a thread that is not Ruby's (a native thread of some C
  # library) is ignored: rb_profile_frames there would crash the process.
  # The native thread waits on a mutex (the handler returns, and the wait
  # goes on).
  def test_ignores_sigprof_on_a_native_thread
    out, st = run_ruby(<<~'RUBY')
      require "fiddle"
      libc = Fiddle::Handle::DEFAULT
      fn = ->(name, args, ret) { Fiddle::Function.new(libc[name], args, ret) }
      vp, int, long = Fiddle::TYPE_VOIDP, Fiddle::TYPE_INT, Fiddle::TYPE_LONG
      create = fn.("pthread_create", [vp, vp, vp, vp], int)
      join = fn.("pthread_join", [long, vp], int)
      lock = fn.("pthread_mutex_lock", [vp], int)
      unlock = fn.("pthread_mutex_unlock", [vp], int)
      syscall = fn.("syscall", [long, long, long, long], long)
      N.start(settings(dir), {})
      mutex = Fiddle::Pointer.malloc(64)
      mutex[0, 64] = "\0" * 64
      lock.(mutex)
      tbuf = Fiddle::Pointer.malloc(8, Fiddle::RUBY_FREE)
      before = Dir.children("/proc/self/task")
      raise "pthread_create" unless create.(tbuf, nil, libc["pthread_mutex_lock"], mutex).zero?
      sleep 0.2
      fresh = Dir.children("/proc/self/task") - before
      sent = 0
      20.times do
        fresh.each { |t| sent += 1 if syscall.(234, Process.pid, Integer(t), Signal.list.fetch("PROF")).zero? }
        sleep 0.005
      end
      unlock.(mutex)
      join.(tbuf[0, 8].unpack1("Q"), nil)
      puts "NEW #{fresh.size} SENT #{sent} RUNNING #{N.running?}"
      N.stop
    RUBY
    assert st.success?, out
    assert_match(/^NEW 1 SENT 20 RUNNING true/, out)
  end

  # The program exec runs must find SIGPROF neither pending nor ignored, and
  # a failed exec leaves the profiler running.
  def test_exec_guard
    out, st = run_ruby(<<~RUBY)
      N.start(settings(dir, sample_rate: 1000, sampler_cpu_budget: 0), {})
      workers = 2.times.map { Thread.new { loop { burn(0.01) } } }
      burn(0.2)
      begin
        exec("/nonexistent/program")
      rescue SystemCallError => e
        puts "FAILED_EXEC \#{e.class} RUNNING \#{N.running?}"
      end
      burn(0.2)
      puts "CAPTURED \#{N.stats["captured"]}"
      $stdout.flush
      exec(#{RbConfig.ruby.inspect}, "-e", 'puts File.read("/proc/self/status").lines.grep(/^(SigPnd|ShdPnd|SigIgn):/).join; puts "EXEC_OK"')
    RUBY
    assert st.success?, out
    assert_match(/^FAILED_EXEC Errno::ENOENT RUNNING true/, out)
    assert_operator out[/CAPTURED (\d+)/, 1].to_i, :>, 50, out
    assert_match(/^EXEC_OK/, out)
    %w[SigPnd ShdPnd SigIgn].each do |field|
      mask = out[/^#{field}:\s*(\h+)/, 1]
      refute_nil mask, out
      assert_equal 0, mask.to_i(16) & PROF_BIT, "#{field} has SIGPROF: #{out}"
    end
  end
end
