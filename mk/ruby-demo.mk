# make demo-ruby: build and install the gem (mk/ruby.mk's build-ruby), then
# profile examples/ruby/shop.rb for DEMO_RUBY_SECONDS into DEMO_RUBY_DIR: its
# stop writes flamegraph.html there; the gem's `pyroscope-native report` then
# rewrites the page opened on the breakdown by endpoint and prints the top
# functions. The commands are echoed without the gem environment (GEM_HOME). Run
# it after the Python demo: that one starts by emptying DEMO_DIR.
DEMO_RUBY_DIR ?= $(DEMO_DIR)/ruby
DEMO_RUBY_SECONDS ?= 5

.PHONY: demo-ruby
demo-ruby: build-ruby
	rm -rf $(DEMO_RUBY_DIR)
	@echo "ruby examples/ruby/shop.rb --seconds $(DEMO_RUBY_SECONDS) --output-dir $(DEMO_RUBY_DIR)"
	@$(RUBY_GEM_ENV) $(RUBY) examples/ruby/shop.rb --seconds $(DEMO_RUBY_SECONDS) \
		--output-dir $(DEMO_RUBY_DIR)
	@echo "pyroscope-native report $(DEMO_RUBY_DIR) --top 10 --group-by endpoint"
	@$(RUBY_GEM_ENV) $(RUBY_GEMHOME)/bin/pyroscope-native report $(DEMO_RUBY_DIR) --top 10 \
		--group-by endpoint --title "examples/ruby/shop.rb"
