# The Node example (examples/node/shop.js) profiled into $(DEMO_DIR)/node, no
# server needed: `make demo-node` (the lead adds it to `make demo`). It
# installs and builds the package first (build-node, mk/node.mk). The
# binding writes the profiles; the flame graph page comes from the report
# CLI of the Python package in $(DEMO_VENV) (`make demo` installs it) when
# the binding wrote none itself.
DEMO_NODE_SECONDS ?= 5

.PHONY: demo-node
demo-node: build-node
	rm -rf $(DEMO_DIR)/node
	node examples/node/shop.js --seconds $(DEMO_NODE_SECONDS) --output-dir $(DEMO_DIR)/node
	@dir=$(DEMO_DIR)/node; html=$$dir/flamegraph.html; \
	if [ ! -f $$html ] && $(DEMO_VENV)/bin/python -c 'import pyroscope' 2>/dev/null; then \
		$(DEMO_VENV)/bin/python -m pyroscope report --top 10 --title "examples/node/shop.js" \
			--output $$html $$dir/*-cpu-*.pb.gz; \
	fi; \
	if [ -f $$html ]; then echo "node demo: profiles in $$dir/, flame graph: $$html"; \
	else echo "node demo: profiles in $$dir/ (no flame graph: 'make demo' installs the report CLI" \
		"into $(DEMO_VENV), then: $(DEMO_VENV)/bin/python -m pyroscope report $$dir/*-cpu-*.pb.gz)"; fi
