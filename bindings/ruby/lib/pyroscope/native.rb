# The C extension: the platform gem carries one precompiled per Ruby minor
# (lib/pyroscope/<major.minor>/pyroscope_native.so); the source gem, and a
# checkout, one compiled on install (lib/pyroscope/pyroscope_native.so).
minor = RUBY_VERSION[/\A\d+\.\d+/]
if File.exist?(File.join(__dir__, minor, "pyroscope_native.so"))
  require "pyroscope/#{minor}/pyroscope_native"
else
  require "pyroscope/pyroscope_native"
end
