# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "rubygems/package"
require "tmpdir"

# Issue 28: what a user switching gems meets before any profile is taken.
class PackagingTest < Minitest::Test
  include PyroscopeTest

  REPO = File.expand_path("../../..", __dir__)

  # `gem build` from a clean checkout (no ext/pyroscope_native/core: what
  # Bundler's git: source and a plain clone have) carries the C core, so
  # the gem installs on its own. It carried none: the core was copied in
  # only by `make build-ruby`.
  def test_gem_build_from_a_clean_checkout_carries_the_core
    Dir.mktmpdir("pn-gem-") do |dir|
      FileUtils.mkdir_p(File.join(dir, "bindings"))
      FileUtils.cp_r(File.join(REPO, "core"), dir)
      FileUtils.cp_r(File.join(REPO, "bindings", "ruby"), File.join(dir, "bindings"))
      FileUtils.rm_rf(File.join(dir, "bindings", "ruby", "ext", "pyroscope_native", "core"))
      gem = File.join(dir, "out.gem")
      out, status = Open3.capture2e(Gem.ruby, "-S", "gem", "build", "--silent", "pyroscope-native.gemspec",
                                    "-o", gem, chdir: File.join(dir, "bindings", "ruby"))
      assert status.success?, out
      files = Gem::Package.new(gem).spec.files
      %w[src/pipeline/agent.c src/export/queue.c include/pyroscope_native.h report/breakdown.c].each do |f|
        assert_includes files, "ext/pyroscope_native/core/#{f}"
      end
      assert_includes files, "lib/pyroscope-native.rb"
    end
  end

  # `gem "pyroscope-native"` + Bundler.require requires the gem's name;
  # code written for pyroscope-otel reads Pyroscope::Otel::VERSION.
  def test_require_by_gem_name_and_otel_version
    out, err, status = ruby_child(<<~RUBY, preload: false)
      require "pyroscope-native"
      require "pyroscope/otel"
      puts "CONFIGURE \#{Pyroscope.respond_to?(:configure)} OTEL \#{Pyroscope::Otel::VERSION}"
    RUBY
    assert status.success?, err
    assert_match(/^CONFIGURE true OTEL 0\.1\.4$/, out)
  end
end
