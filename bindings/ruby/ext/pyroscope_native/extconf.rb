# Builds pyroscope/pyroscope_native: our sources plus the pyroscope-native
# C core, compiled in. The gem carries a copy of the core under core/ (the
# gemspec copies it in); from a source checkout the repository's core/ is
# used directly.
require "mkmf"

here = File.expand_path(__dir__)
core = File.join(here, "core")
core = File.expand_path("../../../../core", here) unless File.directory?(File.join(core, "src"))
abort "pyroscope-native: the C core was not found (#{core})" unless File.directory?(File.join(core, "src"))

def need(header, lib, func, package)
  return if have_header(header) && have_library(lib, func)
  abort "pyroscope-native: #{header} / lib#{lib} missing; install it with: apt-get install #{package}"
end

need("zlib.h", "z", "deflate", "zlib1g-dev")
need("protobuf-c/protobuf-c.h", "protobuf-c", "protobuf_c_message_pack", "libprotobuf-c-dev")
have_library("pthread", "pthread_create")
have_library("m", "lround")
have_library("dl", "dlopen")
abort "pyroscope-native: libcurl headers missing (apt-get install libcurl4-openssl-dev)" unless have_header("curl/curl.h")

# Ruby version differences, found by probing the headers.
have_func("rb_postponed_job_trigger", "ruby/debug.h")

# The core's sources: the ones core/sources.txt lists.
core_srcs = File.readlines(File.join(core, "sources.txt"), chomp: true)
                .reject { |l| l.strip.empty? || l.start_with?("#") }.map { |l| File.join(core, l.strip) }
core_dirs = core_srcs.map { |s| File.dirname(s) }.uniq
own_srcs = Dir[File.join(here, "*.c")].sort

$srcs = own_srcs + core_srcs
$VPATH.concat(core_dirs)
# Ruby's own headers are system headers: their warnings are not ours.
$INCFLAGS = $INCFLAGS.gsub("-I$(arch_hdrdir)", "-isystem $(arch_hdrdir)").gsub("-I$(hdrdir)", "-isystem $(hdrdir)")
# Our files see core/include only; the core's own objects also get its
# private include paths (appended to the Makefile below, per object).
$INCFLAGS << " -I#{here} -I#{core}/include"
# C11 with the project's warnings as errors, for our files and the core's.
$CFLAGS << " -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Wshadow -Wvla -fvisibility=hidden"
# Link-time optimisation: the signal handler's path through our files and
# the core's (slot claim, registry, labels, GC guard) is inlined into one
# function, a few pages of code to touch per sample instead of one per
# source file; -fno-plt calls libruby through the GOT directly. A sample at
# 100 Hz comes after 10 ms of application work, so each page it touches
# is a TLB and cache miss.
# Only where the compiler and linker take the flags (a compiler without
# them builds as before).
if try_cflags("-flto=auto -fno-plt") && try_ldflags("-flto=auto -O2")
  $CFLAGS << " -flto=auto -fno-plt"
  $LDFLAGS << " -flto=auto -O2"
end
# mkmf's own warning list is for Ruby's style, not ours.
$warnflags = ""

create_makefile("pyroscope/pyroscope_native")
File.open("Makefile", "a") do |f|
  objs = core_srcs.map { |s| File.basename(s, ".c") + ".o" }
  f.puts "#{objs.join(' ')}: INCFLAGS += -I#{core}/src -I#{core}/report -I#{core}/gen"
end
