# The platform gem from the source gem's own gemspec: the same name,
# version and metadata, the precompiled extensions instead of extconf.rb.
#   ruby platform_gem.rb GEMSPEC STAGE PLATFORM MINORS OUT_DIR   (prints the gem's path)
require "rubygems/package"

gemspec, stage, platform, minors, out = ARGV
spec = Gem::Specification.load(gemspec)
spec.platform = Gem::Platform.new(platform)
spec.extensions = []
spec.files = Dir.chdir(stage) { Dir["lib/**/*.rb"] + Dir["lib/pyroscope/*/pyroscope_native.so"] }
# Only the Ruby minors built: another one installs the source gem.
lo, hi = minors.split(",").map { |m| Gem::Version.new(m) }.minmax
spec.required_ruby_version = [">= #{lo}", "< #{Gem::Version.new("#{hi}.0").bump}.dev"]
file = Dir.chdir(stage) { Gem::Package.build(spec) }
dest = File.join(out, File.basename(file))
File.rename(File.join(stage, file), dest)
puts dest
