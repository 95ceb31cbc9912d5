# The pyroscope-native gem: `require "pyroscope"` gives the pyroscope gem's
# API (Pyroscope.configure, tag_wrapper, ...) on an in-process sampler
# built from the pyroscope-native C core. In a checkout (`gem build`,
# Bundler's git: source) this file copies the repository's core/ into
# ext/pyroscope_native/core first, so the gem builds on its own; it has no
# runtime gem dependencies (installs offline).
require "fileutils"

# Brings ext/pyroscope_native/core in line with the repository's core/:
# writes only files that differ and removes ones the core no longer has, so
# builds of one commit running side by side never see a half-copied tree.
sync_core = lambda do |repo_core, gem_core|
  wanted = { "sources.txt" => File.join(repo_core, "sources.txt") } # the list extconf.rb builds
  %w[include src report gen].each do |top|
    Dir.glob("**/*.{c,h}", base: File.join(repo_core, top)).each do |rel|
      wanted[File.join(top, rel)] = File.join(repo_core, top, rel)
    end
  end
  wanted.each do |rel, from|
    to = File.join(gem_core, rel)
    next if File.file?(to) && File.binread(to) == File.binread(from)

    FileUtils.mkdir_p(File.dirname(to))
    tmp = "#{to}.#{Process.pid}.tmp"
    FileUtils.cp(from, tmp)
    File.rename(tmp, to)
  end
  Dir.glob("**/*.{c,h}", base: gem_core).each do |rel|
    FileUtils.rm_f(File.join(gem_core, rel)) unless wanted.key?(rel)
  end
end

repo_core = File.expand_path("../../core", __dir__)
if File.directory?(File.join(repo_core, "src"))
  sync_core.call(repo_core, File.join(__dir__, "ext", "pyroscope_native", "core"))
end
version_file = File.join(__dir__, "lib", "pyroscope", "version.rb")
version = File.exist?(version_file) && File.read(version_file)[/VERSION\s*=\s*["']([^"']+)/, 1]

Gem::Specification.new do |s|
  s.name = "pyroscope-native"
  s.version = version || "0.1.0"
  s.summary = "Continuous profiler for CRuby with the pyroscope gem's API"
  s.description = "Samples every Ruby thread in-process (a native sampler thread signals " \
                  "the threads that used CPU; stacks are captured with rb_profile_frames), " \
                  "labels per Fiber, forked workers profiled, uploads to Pyroscope, OTLP " \
                  "or a local folder."
  s.authors = ["pyroscope-native contributors"]
  s.license = "Apache-2.0"
  s.homepage = "https://github.com/grafana/pyroscope"
  s.required_ruby_version = ">= 3.1"
  s.files = Dir.chdir(__dir__) do
    Dir["lib/**/*.rb"] + Dir["ext/pyroscope_native/*.{c,h,rb}"] +
      Dir["ext/pyroscope_native/core/**/*.{c,h}"] + ["ext/pyroscope_native/core/sources.txt"]
  end
  s.files += ["exe/pyroscope-native"]
  s.bindir = "exe"
  s.executables = ["pyroscope-native"] # `pyroscope-native report PATH...`
  s.extensions = ["ext/pyroscope_native/extconf.rb"]
  s.require_paths = ["lib"]
end
