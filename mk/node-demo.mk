# The Node example (examples/node/shop.js) profiled into $(DEMO_DIR)/node, no
# server needed: `make demo-node` (part of `make demo`). It installs and
# builds the package first (build-node, mk/node.mk). The binding writes the
# profiles and, when the app stops, flamegraph.html beside them; the
# package's report command then prints the top functions and CPU per
# endpoint (and rewrites the page on that view).
DEMO_NODE_SECONDS ?= 5

.PHONY: demo-node
demo-node: build-node
	rm -rf $(DEMO_DIR)/node
	node examples/node/shop.js --seconds $(DEMO_NODE_SECONDS) --output-dir $(DEMO_DIR)/node
	node bindings/node/bin/pyroscope-native.js report $(DEMO_DIR)/node --top 10 \
		--group-by endpoint --title "examples/node/shop.js"
