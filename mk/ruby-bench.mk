# pyroscope-native against stackprof (Debian ruby-stackprof) at 100 Hz,
# plus like-for-like pairs at BENCH_HIGH_HZ (bench/ruby/run.rb says how),
# alternating rounds; BENCH_RUBY_ARGS="rounds worksize". The 100 Hz runs
# carry bench/ruby/cost_shim.c (built by run.rb with the C compiler Ruby
# was built with), which times both profilers' handlers and jobs. Never
# part of test. Then bench/ruby/alloc_cost.rb: the memory profile's cost on
# allocation-heavy code (none / cpu / cpu+memory side by side, each
# round's own ratio), BENCH_RUBY_ALLOC_ARGS="rounds size".
BENCH_RUBY_ARGS ?= 11 600
BENCH_RUBY_ALLOC_ARGS ?= 11 400

.PHONY: bench-ruby
bench-ruby: build-ruby
	$(RUBY_GEM_ENV) $(RUBY) bench/ruby/run.rb $(BENCH_RUBY_ARGS)
	$(RUBY_GEM_ENV) $(RUBY) bench/ruby/alloc_cost.rb $(BENCH_RUBY_ALLOC_ARGS)
