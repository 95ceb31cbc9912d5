# make demo-ruby: build and install the gem (mk/ruby.mk's build-ruby), then
# profile examples/ruby/shop.rb for DEMO_RUBY_SECONDS into DEMO_RUBY_DIR: its
# stop writes flamegraph.html there; Pyroscope.write_report then rewrites the
# page opened on the breakdown by endpoint and prints the top functions. Run
# it after the Python demo: that one starts by emptying DEMO_DIR.
DEMO_RUBY_DIR ?= $(DEMO_DIR)/ruby
DEMO_RUBY_SECONDS ?= 5

.PHONY: demo-ruby
demo-ruby: build-ruby
	rm -rf $(DEMO_RUBY_DIR)
	$(RUBY_GEM_ENV) $(RUBY) examples/ruby/shop.rb --seconds $(DEMO_RUBY_SECONDS) \
		--output-dir $(DEMO_RUBY_DIR)
	$(RUBY_GEM_ENV) $(RUBY) -rpyroscope -e 'r = Pyroscope.write_report(ARGV[0], top: 10, \
		group_by: "endpoint", title: "examples/ruby/shop.rb"); puts r[:text], \
		"#{r[:profiles]} profiles read, flame graph: #{r[:output]}"' $(DEMO_RUBY_DIR)
