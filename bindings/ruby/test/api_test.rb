# frozen_string_literal: true

require_relative "test_helper"

# The module API of the pyroscope gem 1.1 (and what pyroscope-otel 0.1.4
# calls from the pre-1.0 API), the Rails hook.
class ApiTest < Minitest::Test
  include PyroscopeTest

  def teardown
    Pyroscope.stop
  end

  def labels
    Pyroscope::Native.labels_current
  end

  def test_the_gems_methods_exist
    %i[configure current_config tag_wrapper tag remove_tags _add_tags _remove_tags stop
       shutdown thread_id initialize_rails_hooks].each do |m|
      assert_respond_to Pyroscope, m
    end
    assert_match(/\A\d+\.\d+\.\d+\z/, Pyroscope::VERSION)
  end

  # Only the main Ractor is sampled; stats say how many others run.
  def test_stats_count_the_ractors_not_sampled
    out, err, status = ruby_child(<<~'RUBY')
      Warning[:experimental] = false
      puts "BEFORE #{Pyroscope.stats["ractors_not_sampled"]}"
      r = Ractor.new { Ractor.receive }
      puts "DURING #{Pyroscope.stats["ractors_not_sampled"]}"
      r.send(:done)
      r.take
    RUBY
    assert status.success?, err
    assert_match(/^BEFORE 0$/, out)
    assert_match(/^DURING 1$/, out)
  end

  def test_stop_and_shutdown_when_not_running
    refute Pyroscope.running?
    assert_equal false, Pyroscope.stop
    assert_equal false, Pyroscope.shutdown
  end

  def test_configure_stop_restart
    Dir.mktmpdir do |dir|
      clean_env do
        assert_equal true, Pyroscope.configure { |c|
          c.application_name = "api.test"
          c.output_dir = dir
        }
        assert Pyroscope.running?
        assert_equal "api.test", Pyroscope.current_config.application_name
        configure_to(dir, "api.test2") # configure again replaces the running profiler
        assert Pyroscope.running?
        assert_kind_of Hash, Pyroscope.stats
        assert_equal true, Pyroscope.shutdown
        refute Pyroscope.running?
        assert_equal "api.test2", Pyroscope.current_config.application_name
      end
    end
  end

  # flush writes the current period at once (the upload interval is long).
  def test_flush_writes_the_current_period
    Dir.mktmpdir do |dir|
      clean_env do
        configure_to(dir, "api.flush", upload_interval: 600)
        stop = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.1
        nil while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < stop
        assert_equal true, Pyroscope.flush(30)
        refute_empty Dir.children(dir), "flush wrote nothing"
        assert_raises(Pyroscope::ConfigError) { Pyroscope.flush("soon") }
      end
    end
  end

  def test_thread_id_is_the_kernel_tid
    assert_equal Thread.current.native_thread_id, Pyroscope.thread_id
    other = Thread.new { [Pyroscope.thread_id, Thread.current.native_thread_id] }.value
    assert_equal other[1], other[0]
    refute_equal Pyroscope.thread_id, other[0]
  end

  def test_add_and_remove_tags_one_argument
    assert_equal true, Pyroscope._add_tags("a" => "1", b: 2)
    assert_equal({ "a" => "1", "b" => "2" }, labels)
    Pyroscope._remove_tags("a" => "other") # only a matching value is removed
    assert_equal({ "a" => "1", "b" => "2" }, labels)
    Pyroscope._remove_tags("a" => "1", b: 2)
    assert_equal({}, labels)
  end

  # pyroscope-otel 0.1.4: _add_tags(Pyroscope.thread_id, {profile_id:, "span" => ...}).
  def test_add_and_remove_tags_with_thread_id
    tags = { "profile_id": "00f067aa0ba902b7", "span" => "GET /" }
    Pyroscope._add_tags(Pyroscope.thread_id, tags)
    assert_equal({ "profile_id" => "00f067aa0ba902b7", "span" => "GET /" }, labels)
    Pyroscope._remove_tags(Pyroscope.thread_id, tags)
    assert_equal({}, labels)
    other = Thread.new { Pyroscope.thread_id }.value
    err = assert_raises(ArgumentError) { Pyroscope._add_tags(other, "a" => "1") }
    assert_match(/another thread/, err.message)
    assert_raises(ArgumentError) { Pyroscope._add_tags }
    assert_raises(ArgumentError) { Pyroscope._remove_tags(1, 2, 3) }
    assert Pyroscope._add_tags("__x" => "1") # fixed, never raised (issue 28)
    assert_equal({ "_x" => "1" }, labels)
    Pyroscope._remove_tags("__x" => "1") # removed under the same fixed name
    assert_equal({}, labels)
  end

  def test_logger_receives_library_messages
    log = StringIO.new
    Pyroscope.logger = Logger.new(log)
    Pyroscope.log(30, "something happened")
    assert_match(/WARN -- pyroscope: something happened/, log.string)
  ensure
    Pyroscope.logger = nil
  end

  # ActionController::Base and ::API as Rails defines them, reduced to the
  # two calls the hook uses (around_action, controller_name/action_name).
  module FakeActionController
    class Base
      class << self
        attr_reader :callbacks

        def around_action(callback)
          (@callbacks ||= []) << callback
        end
      end

      attr_reader :controller_name, :action_name

      def initialize(controller, action)
        @controller_name = controller
        @action_name = action
      end

      # What Rails does for a request: each around callback wraps the action.
      def process(&action)
        self.class.callbacks.reverse.inject(action) { |inner, cb| -> { cb.call(self, inner) } }.call
      end
    end

    class API < Base; end
  end

  def test_rails_around_action_labels_the_action
    Object.const_set(:ActionController, FakeActionController)
    Pyroscope.initialize_rails_hooks
    Pyroscope.initialize_rails_hooks # installed once
    assert_equal 1, FakeActionController::Base.callbacks.size
    assert_equal 1, FakeActionController::API.instance_variable_get(:@callbacks).size
    seen = FakeActionController::Base.new("users", "show").process { labels }
    assert_equal({ "action" => "users/show" }, seen)
    assert_equal({}, labels)
    assert_raises(RuntimeError) { FakeActionController::Base.new("users", "boom").process { raise "x" } }
    assert_equal({}, labels)
  ensure
    Object.send(:remove_const, :ActionController) if defined?(::ActionController)
  end

  # The Railtie: defined when Rails is loaded before pyroscope (or at
  # configure, when pyroscope came first), and its after_initialize installs
  # the hook when autoinstrument_rails is on.
  def test_railtie_installs_the_hook_after_initialize
    Dir.mktmpdir do |dir|
      code = <<~RUBY
        require "pyroscope" if ARGV.include?("first")
        module Rails
          class Railtie
            Config = Struct.new(:blocks) do
              def after_initialize(&block) = blocks << block
            end
            def self.config = (@@config ||= Config.new([]))
          end
        end
        module ActionController
          class Base
            def self.around_action(cb) = (@cbs ||= []) << cb
            def self.cbs = @cbs
          end
        end
        require "pyroscope"
        Pyroscope.configure do |c|
          c.application_name = "rails.app"
          c.output_dir = #{dir.inspect}
          c.autoinstrument_rails = !ARGV.include?("off")
        end
        Rails::Railtie.config.blocks.each { |b| b.call(:app) }
        puts [Pyroscope::Railtie.name, (ActionController::Base.cbs || []).size].join(" ")
        Pyroscope.stop
      RUBY
      { [] => "1", ["first"] => "1", ["off"] => "0" }.each do |args, hooks|
        out, err, status = ruby_child(code, preload: false, args: args)
        assert status.success?, err
        assert_equal "Pyroscope::Railtie #{hooks}", out.strip, args.inspect
      end
    end
  end
end
