# The platform gem from the source gem's own gemspec: the same name,
# version and metadata, the precompiled extensions instead of extconf.rb.
#   ruby platform_gem.rb GEMSPEC STAGE PLATFORM MINORS OUT_DIR   (prints the gem's path)
require "rubygems/package"

gemspec, stage, platform, minors, out = ARGV
spec = Gem::Specification.load(gemspec)
spec.platform = Gem::Platform.new(platform)
spec.extensions = []
# The executables (exe/) come from the source tree as they are.
require "fileutils"
src = File.dirname(File.expand_path(gemspec))
spec.executables.each do |x|
  FileUtils.mkdir_p(File.join(stage, spec.bindir))
  FileUtils.cp(File.join(src, spec.bindir, x), File.join(stage, spec.bindir, x))
end
spec.files = Dir.chdir(stage) do
  Dir["lib/**/*.rb"] + Dir["lib/pyroscope/*/pyroscope_native.so"] +
    spec.executables.map { |x| File.join(spec.bindir, x) }
end
# Only the Ruby minors built: another one installs the source gem.
lo, hi = minors.split(",").map { |m| Gem::Version.new(m) }.minmax
spec.required_ruby_version = [">= #{lo}", "< #{Gem::Version.new("#{hi}.0").bump}.dev"]
file = Dir.chdir(stage) { Gem::Package.build(spec) }
dest = File.join(out, File.basename(file))
File.rename(File.join(stage, file), dest)
puts dest
