# The Ruby binding on CRuby 3.3 and 3.4 as well as Debian's 3.1: each is
# built from source (Debian's tarball: trixie's ruby3.3, experimental's
# ruby3.4) into build/rubies/<version>, then the whole minitest suite runs
# against a gem built and installed for it. The tests' webrick (a gem since
# Ruby 3.0) is Debian's, pure Ruby. Not part of `make test`: building one
# CRuby takes about ten minutes on two cores.
RUBY_COMPAT_LIB = $(shell ruby -e 'print Gem::Specification.find_by_name("webrick").full_gem_path')/lib
RUBY_COMPAT ?= 3.3.8:ruby3.3:e2e1233ad275b7623a05edf23a01192626d1da454bdfe353a28a87acd8ef015c \
               3.4.5:ruby3.4:141fb3b0192b8196361b3b4d6c29fc9b10c0798dbe54ada1539d9f1c311bfcbf

.PHONY: test-ruby-compat
test-ruby-compat: deps
	@set -e; for spec in $(RUBY_COMPAT); do \
	  v=$${spec%%:*}; rest=$${spec#*:}; pkg=$${rest%%:*}; sha=$${rest#*:}; \
	  echo "== CRuby $$v"; \
	  bindings/ruby/scripts/build_ruby.sh $$v $$pkg $$sha $(BUILD)/rubies/$$v; \
	  RUBYLIB=$(RUBY_COMPAT_LIB) $(MAKE) --no-print-directory test-ruby RUBY=$(CURDIR)/$(BUILD)/rubies/$$v/bin/ruby \
	    GEM=$(CURDIR)/$(BUILD)/rubies/$$v/bin/gem RUBY_BUILD=$(BUILD)/ruby-$$v; \
	done
