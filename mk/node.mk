# The Node binding: `make build-node` installs the npm dependencies (npm ci,
# which also builds the addon) when node_modules is missing or older than
# package-lock.json, then rebuilds the addon incrementally; `make test-node`
# runs every mocha test under bindings/node/test.
NODE_MODULES_STAMP := node_modules/.package-lock.json
NODE_JOBS ?= 2

.PHONY: build-node test-node

$(NODE_MODULES_STAMP): package.json package-lock.json
	PYROSCOPE_NODE_JOBS=$(NODE_JOBS) npm ci --no-audit --no-fund
	@touch $@

build-node: deps $(NODE_MODULES_STAMP)
	PYROSCOPE_NODE_JOBS=$(NODE_JOBS) node bindings/node/scripts/build.js --incremental

test-node: build-node
	node_modules/.bin/mocha --timeout 60000 --exit 'bindings/node/test/*.test.js'
