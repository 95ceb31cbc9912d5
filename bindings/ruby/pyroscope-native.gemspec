# The pyroscope-native gem: `require "pyroscope"` gives the pyroscope gem's
# API (Pyroscope.configure, tag_wrapper, ...) on an in-process sampler
# built from the pyroscope-native C core. The core's sources are copied
# into ext/pyroscope_native/core by `make build-ruby` so the gem builds
# on its own; it has no runtime gem dependencies (installs offline).
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
      Dir["ext/pyroscope_native/core/**/*.{c,h}"]
  end
  s.files += ["exe/pyroscope-native"]
  s.bindir = "exe"
  s.executables = ["pyroscope-native"] # `pyroscope-native report PATH...`
  s.extensions = ["ext/pyroscope_native/extconf.rb"]
  s.require_paths = ["lib"]
end
