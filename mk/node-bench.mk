# Node benchmark: pyroscope-native against @pyroscope/nodejs 0.6.4, side by
# side (bench/node/run.js, ~12 min: 9 rounds of fixed 5000-request windows). bench/node has its own package.json and
# lock, so the anchor never enters the root package; `npm ci` there runs
# when its node_modules is missing or older than the lock. The root package
# (the addon) is built by build-node (mk/node.mk). BENCH_NODE_ARGS=--quick
# for a short smoke run.
BENCH_NODE_STAMP := bench/node/node_modules/.package-lock.json
BENCH_NODE_ARGS ?=

$(BENCH_NODE_STAMP): bench/node/package.json bench/node/package-lock.json
	cd bench/node && npm ci --no-audit --no-fund
	@touch $@

.PHONY: bench-node
bench-node: build-node $(BENCH_NODE_STAMP)
	node bench/node/run.js --out-dir $(BUILD)/bench $(BENCH_NODE_ARGS)

# The heap profile's cost on allocation-heavy code (bench/node/alloc_cost.js, ~5 min):
# memory on vs off side by side, on the machine's Node.
.PHONY: bench-node-alloc
bench-node-alloc: build-node
	mkdir -p $(BUILD)/bench && node bench/node/alloc_cost.js --json $(BUILD)/bench/node-alloc.json
