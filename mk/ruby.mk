# The Ruby binding (bindings/ruby): build-ruby makes the gem (with a copy of
# the C core inside, so it builds on its own) and installs it, offline, into
# $(RUBY_GEMHOME); test-ruby runs every bindings/ruby/test/*_test.rb with
# minitest against that installed gem, one Ruby process per file.
RUBY ?= ruby
GEM ?= gem
RUBY_BUILD := $(BUILD)/ruby
RUBY_GEMHOME := $(abspath $(RUBY_BUILD)/gemhome)
RUBY_EXT := bindings/ruby/ext/pyroscope_native
RUBY_GEM_FILE := $(abspath $(RUBY_BUILD))/pyroscope-native.gem
RUBY_TESTS ?= $(sort $(wildcard bindings/ruby/test/*_test.rb))
RUBY_GEM_ENV = GEM_HOME=$(RUBY_GEMHOME) GEM_PATH=$(RUBY_GEMHOME):$(shell $(RUBY) -e 'print Gem.default_path.join(":")')

.PHONY: build-ruby test-ruby
build-ruby: deps
	@mkdir -p $(RUBY_BUILD)
	rm -rf $(RUBY_EXT)/core && mkdir -p $(RUBY_EXT)/core
	cp -r core/include core/src core/report core/gen $(RUBY_EXT)/core/
	cd bindings/ruby && $(GEM) build --silent pyroscope-native.gemspec -o $(RUBY_GEM_FILE)
	@echo "gem install --local $(RUBY_GEM_FILE)   (GEM_HOME=$(RUBY_GEMHOME))"
	@$(RUBY_GEM_ENV) $(GEM) install --local --no-document --silent $(RUBY_GEM_FILE)

test-ruby: build-ruby
	@set -e; for t in $(RUBY_TESTS); do \
		echo "== $$t"; \
		$(RUBY_GEM_ENV) $(RUBY) -Ibindings/ruby/test $$t; \
	done
