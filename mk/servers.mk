# The real backends (tests/servers): Grafana Pyroscope and an OpenTelemetry
# Collector from the workplace's server folder ($(PN_SERVERS_DIR), default
# ../shared/servers beside the checkout; absent: the lane says so and skips).
# `make test` starts them first (Pyroscope needs a minute or more to be
# ready) and runs test-servers after the other lanes, which reuses their
# builds: the newest CPython's venv, the Node addon, the Ruby gem.
PN_SERVERS_DIR ?= $(abspath ../shared/servers)
export PN_SERVERS_DIR
SERVERS_PY = $(call python_for,$(lastword $(PY_VERSIONS)))
# Node 26 (make runtimes) for the heap.allocations run; absent: not run.
SERVERS_NODE26 = $(wildcard $(CURDIR)/$(NODE_COMPAT_DIR)/$(filter 26.%,$(NODE_COMPAT_VERSIONS))/bin/node)

.PHONY: servers-start servers-stop test-servers servers-suite

servers-start:
	@python3 tests/servers/servers.py start

servers-stop:
	@python3 tests/servers/servers.py stop

# SERVERS_REUSE=1 (from `make test`, after the lanes built everything):
# no rebuild of the venv's package, the addon or the gem.
test-servers: $(if $(SERVERS_REUSE),,build-node build-ruby)
	+@$(LANE) servers-suite

servers-suite:
	@set -e; py=$(SERVERS_PY); \
	if [ -n "$(SERVERS_REUSE)" ]; then \
		v=$(BUILD)/venv/$$($$py -c "import sys; print(sys.implementation.cache_tag + sys.abiflags)"); \
	else $(call py_venv,$$py); fi; \
	t=$$(date +%s); rc=0; \
	PN_PYTHON=$$v/bin/python $(RUBY_GEM_ENV) PN_RUBY=$(RUBY) PN_NODE26=$(SERVERS_NODE26) python3 -u tests/servers/run.py || rc=$$?; \
	python3 tests/servers/servers.py stop; \
	echo "tests/servers: $$(( $$(date +%s) - t )) s"; exit $$rc
