# The Node binding: `make build-node` installs the npm dependencies (npm ci,
# which also builds the addon) when node_modules is missing or older than
# package-lock.json, then rebuilds the addon incrementally; `make test-node`
# runs every mocha test under bindings/node/test with the machine's Node.
# `node-suite` is the suite alone (no build), with NODE_BIN_DIR's node first
# on PATH when set, failing unless it is Node NODE_MAJOR when that is set;
# the lanes of `make test` call it (mk/node-compat.mk).
NODE_MODULES_STAMP := node_modules/.package-lock.json
NODE_JOBS ?= 2
NODE_SUITE_FLAGS ?=

.PHONY: build-node test-node node-suite

$(NODE_MODULES_STAMP): package.json package-lock.json
	PYROSCOPE_NODE_JOBS=$(NODE_JOBS) npm ci --no-audit --no-fund
	@touch $@

build-node: deps $(NODE_MODULES_STAMP)
	PYROSCOPE_NODE_JOBS=$(NODE_JOBS) node bindings/node/scripts/build.js --incremental

test-node: build-node
	@$(MAKE) --no-print-directory node-suite

node-suite:
	@set -e; $(if $(NODE_BIN_DIR),PATH=$(NODE_BIN_DIR):$$PATH;) \
	echo "== Node $$(node -v) ($$(command -v node))"; \
	$(if $(NODE_MAJOR),[ "$$(node -p 'process.versions.node.split(".")[0]')" = $(NODE_MAJOR) ] || \
	  { echo "this lane needs Node $(NODE_MAJOR)"; exit 1; };) \
	node_modules/.bin/mocha --timeout 60000 --exit $(NODE_SUITE_FLAGS) 'bindings/node/test/*.test.js'
