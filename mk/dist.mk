# Artifacts a user installs without a compiler (issue 25), into dist/:
#   make dist   manylinux_2_17 wheels (x86_64, aarch64) per supported CPython,
#               each checked by `auditwheel show`, and the sdist; the npm
#               tarball with prebuilt addons (linux-x64, linux-arm64); the
#               platform gem (x86_64-linux) and the source gem
# The toolchain (Zig from PyPI's ziglang, auditwheel, wheel) lives in its own
# venv; protobuf-c and zlib come from Debian's source packages
# (packaging/sources.sh) and are compiled in. Everything is built under
# $(DIST_BUILD) and reused: a second `make dist` only recompiles what changed.
DIST ?= dist
DIST_BUILD := $(BUILD)/dist
DIST_TOOLS := $(DIST_BUILD)/tools
DIST_PY := $(DIST_TOOLS)/bin/python
DIST_ARCHES ?= x86_64 aarch64
# aarch64 wheels are published only for the CPythons the arm64 smoke test
# runs (test-dist-arm64: Debian sid's arm64 3.13, 3.14, 3.15). 3.11's is
# built against bookworm's arm64 headers and audited, but no test runs it,
# so it stays in $(DIST_BUILD)/unpublished. Debian has no arm64 3.10 or
# 3.12 (no headers): those get no aarch64 wheel; pip builds the sdist.
DIST_PYTHONS_aarch64 := 3.13 3.14 3.15
# x86_64: test-dist's trixie chroot runs 3.13's wheel, test-dist-sid an amd64
# sid minbase 3.14's and 3.15's; 3.10-3.12 are the same build against their
# own headers, each imported and run by its lane of `make test` from source.
DIST_PYTHONS_x86_64 := 3.10 3.11 3.12 3.13 3.14 3.15
DIST_UNPUBLISHED_aarch64 := 3.11
# No aarch64 gem (issue 25 asks for x86_64-linux only).
DIST_RUBY_ARCHES := $(filter x86_64,$(DIST_ARCHES))
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
	$(if $(filter aarch64,$(DIST_ARCHES)),packaging/python_headers.sh $(DIST_BUILD)/headers-arm64 arm64)

wheels = JOBS=$(JOBS) $(DIST_PY) packaging/wheels.py --arch $(1) --out $(2) --build $(DIST_BUILD) \
	$(if $(3),--pythons $(3)) &&
dist-wheels: dist-tools dist-sources
	@rm -f $(DIST)/pyroscope_native-*.whl
	@$(foreach a,$(DIST_ARCHES),$(call wheels,$(a),$(DIST),$(DIST_PYTHONS_$(a))) \
		$(if $(DIST_UNPUBLISHED_$(a)),$(call wheels,$(a),$(DIST_BUILD)/unpublished,$(DIST_UNPUBLISHED_$(a))))) true

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
	@for a in $(DIST_RUBY_ARCHES); do \
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

# The aarch64 smoke test (lane test-dist-arm64): the aarch64 wheels of dist/
# and the npm tarball's linux-arm64 addon, installed by pip and npm in an
# arm64 Debian sid minbase chroot run under qemu-user-static (no compiler,
# no -dev package, no libcurl; built once per machine by
# minimal_chroot.sh, about 25 minutes emulated), each profiling a labelled
# busy loop into a folder (tests/dist/smoke.py). ARM64_CHROOT may name a
# chroot shared by several trees.
ARM64_CHROOT ?= $(PROOF)/sid-arm64
.PHONY: test-dist-arm64 dist-arm64-chroot dist-smoke-arm64
test-dist-arm64: dist dist-arm64-chroot
	+@$(LANE) dist-smoke-arm64

# The chroot and the venvs pip installs into (ensurepip under emulation takes
# minutes): both with `make runtimes`, so the lane itself only installs and runs.
dist-arm64-chroot:
	tests/dist/minimal_chroot.sh $(ARM64_CHROOT) arm64
	python3 tests/dist/smoke.py --chroot $(ARM64_CHROOT) --dist $(DIST) --work $(PROOF)/work-arm64 --prepare

# The x86_64 wheels of the CPythons trixie has none of (3.14, 3.15), on an
# amd64 sid minbase chroot (no compiler, no -dev package, no libcurl), the
# same smoke as above.
SID_AMD64_CHROOT ?= $(PROOF)/sid-amd64
.PHONY: test-dist-sid dist-sid-chroot dist-smoke-sid
test-dist-sid: dist dist-sid-chroot
	+@$(LANE) dist-smoke-sid

dist-sid-chroot:
	tests/dist/minimal_chroot.sh $(SID_AMD64_CHROOT) amd64-sid
	python3 tests/dist/smoke.py --arch x86_64 --chroot $(SID_AMD64_CHROOT) --dist $(DIST) --work $(PROOF)/work-sid --prepare

dist-smoke-sid:
	python3 tests/dist/smoke.py --arch x86_64 --chroot $(SID_AMD64_CHROOT) --dist $(DIST) --work $(PROOF)/work-sid

dist-smoke-arm64:
	tests/dist/qemu_binfmt.sh arm64
	python3 tests/dist/smoke.py --chroot $(ARM64_CHROOT) --dist $(DIST) --work $(PROOF)/work-arm64
