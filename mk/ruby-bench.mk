# pyroscope-native against stackprof (Debian ruby-stackprof) at 100 Hz,
# alternating rounds; BENCH_RUBY_ARGS="rounds worksize". Never part of test.
BENCH_RUBY_ARGS ?= 9 600

.PHONY: bench-ruby
bench-ruby: build-ruby
	$(RUBY_GEM_ENV) $(RUBY) bench/ruby/run.rb $(BENCH_RUBY_ARGS)
