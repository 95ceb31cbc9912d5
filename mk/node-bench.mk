# Node benchmark: pyroscope-native against @pyroscope/nodejs 0.6.4, side by
# side (bench/node/run.js). bench/node has its own package.json and lock, so
# the anchor never enters the root package. BENCH_NODE_ARGS=--quick for a
# short check. The root package (the addon) is installed and built first.
NODE_DIR ?= /usr
BENCH_NODE_ARGS ?=

.PHONY: bench-node
bench-node:
	@[ -d node_modules ] || npm ci --nodedir=$(NODE_DIR)
	@[ -d bench/node/node_modules/@pyroscope/nodejs ] || (cd bench/node && npm ci --nodedir=$(NODE_DIR))
	node bench/node/run.js --out-dir $(BUILD)/bench $(BENCH_NODE_ARGS)
