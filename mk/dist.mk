# Artifacts a user installs without a compiler (issue 25), into dist/:
#   make dist   manylinux_2_17 wheels (x86_64) per supported CPython, each checked
#               by `auditwheel show`, and the sdist; the npm tarball with
#               prebuilt addons; the platform gem and the source gem
# The toolchain (Zig from PyPI's ziglang, auditwheel, wheel) lives in its own
# venv; protobuf-c and zlib come from Debian's source packages
# (packaging/sources.sh) and are compiled in. Everything is built under
# $(DIST_BUILD) and reused: a second `make dist` only recompiles what changed.
DIST ?= dist
DIST_BUILD := $(BUILD)/dist
DIST_TOOLS := $(DIST_BUILD)/tools
DIST_PY := $(DIST_TOOLS)/bin/python
DIST_ARCHES ?= x86_64
DIST_PYTHON_HOST ?= python3
# Headers of CPython 3.14/3.15 and Ruby 3.3/3.4: Debian unstable's, from the
# sid chroot (mk/sid-chroot.mk; built once per machine).
export PN_SID_ROOT := $(abspath $(SID_CHROOT))

.PHONY: dist dist-tools dist-sources dist-wheels dist-sdist dist-node dist-ruby test-dist

$(DIST_TOOLS)/.stamp: packaging/requirements.txt
	@[ -x $(DIST_PY) ] || $(DIST_PYTHON_HOST) -m venv $(DIST_TOOLS)
	$(DIST_PY) -m pip install -q --disable-pip-version-check -r packaging/requirements.txt
	@touch $@

dist-tools: $(DIST_TOOLS)/.stamp

dist-sources: sid-chroot
	packaging/sources.sh $(DIST_BUILD)/src

dist-wheels: dist-tools dist-sources
	@for a in $(DIST_ARCHES); do \
		JOBS=$(JOBS) $(DIST_PY) packaging/wheels.py --arch $$a --out $(DIST) --build $(DIST_BUILD) || exit 1; \
	done

dist-sdist: dist-tools
	@rm -f $(DIST)/pyroscope_native-*.tar.gz
	@mkdir -p $(DIST_BUILD)/sdist
	$(DIST_PY) setup.py -q egg_info --egg-base $(DIST_BUILD)/sdist sdist -d $(DIST) >/dev/null

# The npm tarball with a prebuilt Node-API addon per CPU (node-gyp-build
# loads it; npm install compiles only where none fits).
dist-node: dist-tools dist-sources
	@rm -rf bindings/node/prebuilds $(DIST)/pyroscope-native-*.tgz
	@for a in $(DIST_ARCHES); do \
		JOBS=$(JOBS) $(DIST_PY) packaging/node_addon.py --arch $$a --build $(DIST_BUILD) || exit 1; \
	done
	npm pack --silent --pack-destination $(DIST) >/dev/null

# The platform gem (the extension precompiled per Ruby minor whose headers
# are here: 3.1 from the machine, 3.3/3.4 from the sid chroot) and the
# source gem beside it.
dist-ruby: dist-tools dist-sources
	@rm -f $(DIST)/pyroscope-native-*.gem
	@for a in $(DIST_ARCHES); do \
		JOBS=$(JOBS) $(DIST_PY) packaging/ruby_gem.py --arch $$a --out $(DIST) --build $(DIST_BUILD) || exit 1; \
	done
	$(call ruby_source_gem,$(abspath $(DIST))/pyroscope-native-$(shell sed -n 's/.*VERSION *= *"\(.*\)".*/\1/p' bindings/ruby/lib/pyroscope/version.rb).gem)

dist: dist-wheels dist-sdist dist-node dist-ruby
	@ls -l $(DIST)

# The proof (part of `make test`): the x86_64 artifacts installed by pip,
# npm and gem in a Debian minbase chroot with no compiler, no -dev package
# and no libcurl (tests/dist/minimal_chroot.sh, built once under
# $(DIST_BUILD)/proof), each example profiled into a folder and, for Python
# and Node, to a loopback ingest server (tests/dist/proof.py). The sdist is
# also built from source on the host (with a compiler) once per tree.
PROOF := $(DIST_BUILD)/proof
.PHONY: dist-proof dist-chroot
test-dist: dist dist-chroot
	+@$(LANE) dist-proof

dist-chroot:
	tests/dist/minimal_chroot.sh $(PROOF)/trixie-amd64

dist-proof:
	python3 tests/dist/proof.py --chroot $(PROOF)/trixie-amd64 --dist $(DIST) --work $(PROOF)/work
	@set -e; sd=$$(ls $(DIST)/pyroscope_native-*.tar.gz); key=$$(tar -xOzf $$sd | sha256sum | cut -c1-16); \
	if [ "$$(cat $(PROOF)/sdist.stamp 2>/dev/null)" != "$$key" ]; then \
		rm -rf $(PROOF)/sdist-venv && $(DIST_PYTHON_HOST) -m venv $(PROOF)/sdist-venv && \
		$(PROOF)/sdist-venv/bin/pip install -q --disable-pip-version-check $$sd && \
		$(PROOF)/sdist-venv/bin/python -c 'import pyroscope._native' && \
		echo "sdist: built from source and imported" && echo "$$key" >$(PROOF)/sdist.stamp; \
	fi
