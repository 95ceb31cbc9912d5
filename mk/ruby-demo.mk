# make demo-ruby: build and install the gem (mk/ruby.mk's build-ruby), then
# profile examples/ruby/shop.rb for DEMO_RUBY_SECONDS into DEMO_RUBY_DIR. When
# the Python demo's virtual env exists (make demo made it), its report command
# also writes a flame graph page and prints the top functions. Run it after
# the Python demo: that one starts by emptying DEMO_DIR.
DEMO_RUBY_DIR ?= $(DEMO_DIR)/ruby
DEMO_RUBY_SECONDS ?= 5

.PHONY: demo-ruby
demo-ruby: build-ruby
	rm -rf $(DEMO_RUBY_DIR)
	$(RUBY_GEM_ENV) $(RUBY) examples/ruby/shop.rb --seconds $(DEMO_RUBY_SECONDS) \
		--output-dir $(DEMO_RUBY_DIR)
	@if [ -x $(DEMO_VENV)/bin/python ] && $(DEMO_VENV)/bin/python -c 'import pyroscope' 2>/dev/null; then \
		$(DEMO_VENV)/bin/python -m pyroscope report $(DEMO_RUBY_DIR) --top 10 \
			--title "examples/ruby/shop.rb" --group-by endpoint; \
	else \
		echo "profiles in $(DEMO_RUBY_DIR) (make demo first for a flame graph page)"; \
	fi
