# The Ruby binding (bindings/ruby): `ruby-gem` makes the gem once (with a
# copy of the C core inside, so it builds on its own); `build-ruby` installs
# it, offline, into $(RUBY_GEMHOME); `test-ruby` runs every
# bindings/ruby/test/*_test.rb with minitest against that installed gem, one
# Ruby process per file, on the machine's Ruby (Debian 12's 3.1: the
# test-ruby lane of `make test`). RUBY, GEM and RUBY_BUILD pick another Ruby
# and its own gem home (mk/ruby-compat.mk: 3.3 and 3.4 in the sid chroot).
RUBY ?= ruby
GEM ?= gem
RUBY_BUILD ?= $(BUILD)/ruby
RUBY_GEMHOME = $(abspath $(RUBY_BUILD)/gemhome)
RUBY_EXT := bindings/ruby/ext/pyroscope_native
RUBY_GEM_FILE := $(abspath $(BUILD))/ruby/pyroscope-native.gem
RUBY_TESTS ?= $(sort $(wildcard bindings/ruby/test/*_test.rb))
RUBY_GEM_ENV = GEM_HOME=$(RUBY_GEMHOME) GEM_PATH=$(RUBY_GEMHOME):$(shell $(RUBY) -e 'print Gem.default_path.join(":")')

# The source gem at $(1) (absolute), with a copy of the core inside (the
# gemspec copies it in).
define ruby_source_gem
cd bindings/ruby && $(GEM) build --silent pyroscope-native.gemspec -o $(1)
endef

.PHONY: ruby-gem ruby-install ruby-suite build-ruby test-ruby
ruby-gem: deps
	@mkdir -p $(dir $(RUBY_GEM_FILE))
	$(call ruby_source_gem,$(RUBY_GEM_FILE))

# Needs no host package: runs in the chroot too.
ruby-install:
	@echo "gem install --local $(RUBY_GEM_FILE)   (GEM_HOME=$(RUBY_GEMHOME))"
	$(RUBY_GEM_ENV) $(GEM) install --local --no-document --silent $(RUBY_GEM_FILE)

# Every file runs, the failed ones are named at the end.
ruby-suite:
	@echo "== $$($(RUBY) -v)"; failed=; for t in $(RUBY_TESTS); do \
		echo "== $$t"; \
		$(RUBY_GEM_ENV) $(RUBY) -Ibindings/ruby/test $$t || failed="$$failed $$t"; \
	done; [ -z "$$failed" ] || { echo "== failed:$$failed"; exit 1; }

build-ruby: ruby-gem
	@$(MAKE) --no-print-directory ruby-install

test-ruby: build-ruby go-tools
	+@$(LANE) ruby-suite
