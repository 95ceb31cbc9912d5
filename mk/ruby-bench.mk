# pyroscope-native against stackprof (Debian ruby-stackprof) at 100 Hz,
# plus a like-for-like pair at BENCH_HIGH_HZ (bench/ruby/run.rb says how),
# alternating rounds; BENCH_RUBY_ARGS="rounds worksize". Never part of test.
BENCH_RUBY_ARGS ?= 15 600

.PHONY: bench-ruby
bench-ruby: build-ruby
	$(RUBY_GEM_ENV) $(RUBY) bench/ruby/run.rb $(BENCH_RUBY_ARGS)
