# pyroscope-native: the front door.
#   make demo       build and run the Python, Node and Ruby example apps, profiles + flame graphs
#                   in ./pyroscope-profiles (Node's under node/, Ruby's under ruby/)
#   make demo-c     the same with the C example
#   make test       install what is missing, build, run every test suite
#   make runtimes   install what the lanes run on (chroots, CPython 3.13t, Node lines); CI's first step
#   make test-asan  core tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-release  core tests built as Release (-O3): -Werror must hold there too
#   make test-valgrind  core tests under valgrind memcheck (part of `make test`)
#   make test-python    Python-side tests: lanes test-python-3.10 ... 3.13 (pyenv's), 3.14 and
#                       3.15 (the sid chroot, mk/python-sid.mk), 3.13t (free-threaded, built
#                       once, mk/python-ft.mk); all in `make test`
#   make test-node      Node binding tests, mocha, on the machine's Node (mk/node.mk);
#                       lanes test-node-20/22/24/26 in `make test`
#   make test-ruby      Ruby gem tests, minitest, on the machine's Ruby (mk/ruby.mk);
#                       lanes test-ruby (3.1), test-ruby-3.3/3.4 (sid chroot) in `make test`
#   make test-servers   every binding against a real Pyroscope and OTel Collector (lane of
#                       `make test`, run alone after the other lanes; mk/servers.mk)
#   make dist       artifacts a user installs without a compiler, into dist/ (mk/dist.mk)
#   make test-dist  install them in a chroot with no compiler nor libcurl (lane of `make test`)
#   make test-dist-arm64  the aarch64 ones on an arm64 chroot under qemu (lane of `make test`)
#   make test-dist-sid    the x86_64 wheels of CPython 3.14/3.15 on an amd64 sid chroot (lane)
#   make bench      benchmarks (never part of `make test`): core, Python, Node, Ruby
#   make proto      regenerate core/gen from proto/

SHELL := /bin/bash
JOBS ?= 2
BUILD ?= build
# The Debian unstable chroot with today's runtimes (mk/sid-chroot.mk).
SID_CHROOT ?= $(BUILD)/sid
ASAN_BUILD ?= build-asan
RELEASE_BUILD ?= build-release
DEMO_DIR ?= pyroscope-profiles
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

# Debian packages the build and the tests need (libssl-dev: the tests' TLS
# server; libcurl4-openssl-dev brings libcurl4, which uploads load; chromium:
# the report page test loads the page headless; ruby-dev: the gem's C
# extension; libffi-dev: ctypes in the free-threaded CPython built for its
# lane, mk/python-ft.mk; qemu-user-static: the arm64 chroot of
# test-dist-arm64, mk/dist.mk). Node.js 20 with its headers comes with the machine.
APT_PACKAGES := build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev \
	libcurl4-openssl-dev zlib1g-dev python3-dev libssl-dev valgrind chromium ruby ruby-dev \
	libffi-dev qemu-user-static

.PHONY: all deps build test test-c test-valgrind test-asan test-release proto bench demo demo-c clean

all: build

# Idempotent and quiet when everything is present; installs what is missing
# when run as root, and says what to install otherwise.
deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:" $$missing; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
		else \
			echo "missing Debian packages:" $$missing; \
			echo "install them with: sudo apt-get install" $$missing; exit 1; \
		fi; \
	fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Every suite on every runtime is a lane: the C tests, valgrind, each CPython,
# each Node line, each CRuby. `make test` builds what they share, then runs
# the lanes JOBS at a time (most of their time is spent waiting on profiling
# periods and child processes), each lane's output printed together when it
# ends; a failing lane never stops the others (make -k), and the run ends
# with every lane's status and time (tests/lane.sh; records in $(LANE_DIR)),
# failing if any lane failed or could not run.
LANE_DIR := $(BUILD)/lanes
LANE_CMD = tests/lane.sh $(LANE_DIR) $@
LANE = $(LANE_CMD) $(MAKE) --no-print-directory
PY_VERSIONS := 3.10 3.11 3.12 3.13
PY_LANES := $(addprefix test-python-,$(PY_VERSIONS))
ALL_PY_LANES = $(PY_LANES) $(PY_SID_LANES) $(PY_FT_LANE)
LANES = test-c test-valgrind $(ALL_PY_LANES) $(NODE_LANES) $(RUBY_LANES) test-dist \
	test-dist-sid test-dist-arm64

# The real servers (mk/servers.mk) start first, since Pyroscope needs a
# minute or more to be ready, and their lane runs alone after the others:
# its CPU split checks want the machine to themselves.
test:
	@rm -rf $(LANE_DIR)
	@$(MAKE) --no-print-directory servers-start || true
	@$(MAKE) --no-print-directory -k -j$(JOBS) --output-sync=target $(LANES); \
	$(MAKE) --no-print-directory test-servers SERVERS_REUSE=1; \
	tests/lane.sh --summary $(LANE_DIR) $(LANES) test-servers

# What the lanes run on that is installed rather than built from this
# checkout: the sid chroot (CPython 3.14/3.15, CRuby 3.3/3.4), the
# free-threaded CPython, Node 22/24/26, Go's tools, the packaging toolchain
# and the minimal chroots of test-dist (amd64), test-dist-sid (amd64 sid) and
# test-dist-arm64 (arm64, emulated by qemu-user-static). `make test` makes whatever is missing; CI
# installs them first (.ci/run), as it installs the Debian packages.
.PHONY: runtimes
runtimes: deps
	@$(MAKE) --no-print-directory -j$(JOBS) sid-chroot python-ft go-tools dist-tools dist-sources \
		dist-chroot dist-sid-chroot dist-arm64-chroot $(foreach v,$(NODE_COMPAT_VERSIONS),$(NODE_COMPAT_DIR)/$(v)/bin/node)

# The CPython of each version: pyenv's newest, else python3.1x on PATH.
python_for = $(shell p=$$(ls -d $$(pyenv root 2>/dev/null)/versions/$(1).*/bin/python 2>/dev/null | sort -V | tail -1); \
	[ -n "$$p" ] || p=$$(command -v python$(1) 2>/dev/null); echo $$p)

# One virtual environment per interpreter under $(BUILD)/venv/<tag>, with
# the test requirements (file $(2), default requirements.txt) and this
# package installed (rebuilt every run).
define py_venv
v=$(BUILD)/venv/$$($(1) -c "import sys; print(sys.implementation.cache_tag + sys.abiflags)"); \
[ -x $$v/bin/python ] || $(1) -m venv $$v; \
$$v/bin/python -m pip install -q --disable-pip-version-check -r $(or $(2),bindings/python/tests/requirements.txt); \
flock $(BUILD)/.pip-install.lock \
	$$v/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
endef
# (flock: lanes in parallel would share setuptools' build/ and egg-info.)

# Python tests, one lane per CPython version (a version missing from the
# machine fails its lane); pytest is installed into each venv.
# The report page's browser tests (test_report_ui.py: the C page, the same for
# every interpreter) run in the 3.13 lane only.
.PHONY: test-python $(PY_LANES) python-suite
test-python:
	@rm -rf $(LANE_DIR)
	@$(MAKE) --no-print-directory -k -j$(JOBS) --output-sync=target $(ALL_PY_LANES); \
	tests/lane.sh --summary $(LANE_DIR) $(ALL_PY_LANES)

$(PY_LANES): test-python-%:
	+@$(LANE) python-suite PY=$(call python_for,$*) PY_VERSION=$*

python-suite:
	@set -e; py=$(PY); \
	[ -n "$$py" ] || { echo "no CPython $(PY_VERSION) on this machine (pyenv or python$(PY_VERSION) on PATH)"; exit 1; }; \
	mkdir -p $(BUILD); $(call py_venv,$$py); \
	echo "== $$($$v/bin/python -V) =="; \
	$(if $(filter-out 3.13,$(PY_VERSION)),PN_PAGE_UI_ONCE=skip) $$v/bin/python -m pytest -q -p no:cacheprovider \
		bindings/python/tests/walker bindings/python/tests/package

test-c: build go-tools
	+@$(LANE) ctest-run

.PHONY: ctest-run valgrind-run
ctest-run:
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Every C test under memcheck: no leaks, no invalid accesses. Timing checks
# relax themselves under PN_TEST_SLOW (threads are serialised by valgrind).
test-valgrind: build go-tools
	+@$(LANE) valgrind-run

valgrind-run:
	@set -e; fail=0; for t in $(BUILD)/test_*; do \
		[ -x "$$t" ] || continue; \
		if PN_TEST_SLOW=1 PN_SOURCE_DIR=$(CURDIR) valgrind -q --fair-sched=yes --leak-check=full \
			--suppressions=tests/c/support/valgrind.supp \
			--errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
			"$$t" > "$$t.valgrind.log" 2>&1; then \
			echo "valgrind ok   $$(basename $$t)"; \
		else \
			echo "valgrind FAIL $$(basename $$t)"; cat "$$t.valgrind.log"; fail=1; \
		fi; \
	done; exit $$fail

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPN_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && PN_TEST_SLOW=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j$(JOBS)

# -O3 finds warnings (and so -Werror failures) that -O2 does not.
test-release: deps
	cmake -S . -B $(RELEASE_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(RELEASE_BUILD) -j$(JOBS)
	cd $(RELEASE_BUILD) && ctest --output-on-failure -j$(JOBS)

# Every .proto under proto/ (pprof, and OTLP profiles under opentelemetry/).
PROTOS := $(shell cd proto && find . -name '*.proto' | sed 's|^\./||' | sort)
proto: deps
	cd proto && protoc-c --c_out=../core/gen --proto_path=. $(PROTOS)

# bench_core's output is kept: the Python report reads its encode table.
bench: build
	@mkdir -p $(BUILD)/bench
	set -o pipefail; $(BUILD)/bench_core | tee $(BUILD)/bench/bench_core.txt
	$(MAKE) --no-print-directory bench-python BENCH_CORE_OUTPUT=$(BUILD)/bench/bench_core.txt
	$(MAKE) --no-print-directory bench-node bench-node-alloc bench-ruby

# Python benchmarks against pyroscope-io and py-spy (each in its own venv
# under $(BUILD)/bench, from PyPI); BENCH_ARGS=--quick for a short check.
BENCH_PYTHON ?= python3
.PHONY: bench-python
# The runtimes section runs 3.13 (pyenv) beside 3.14 (sid chroot) and the
# free-threaded 3.13t, so it needs those (as `make runtimes` installs them).
BENCH_RUNTIMES ?= 3.13=$(call python_for,3.13),3.14=$(abspath $(SID_CHROOT)):/usr/bin/python3.14,3.13t=$(abspath $(PYTHON_FT_PREFIX))/bin/python3
bench-python: build sid-chroot python-ft
	$(BENCH_PYTHON) bench/python/run.py --build-dir $(BUILD) --runtimes "$(BENCH_RUNTIMES)" \
		$(if $(BENCH_CORE_OUTPUT),--core-output $(BENCH_CORE_OUTPUT)) $(BENCH_ARGS)

# The Python example through the CLI, in a project-local virtual environment
# (DEMO_VENV, made with DEMO_PYTHON), writing to DEMO_DIR; no server needed.
DEMO_VENV ?= .venv-demo
DEMO_PYTHON ?= python3

demo: deps
	@[ -x $(DEMO_VENV)/bin/python ] || $(DEMO_PYTHON) -m venv $(DEMO_VENV) || { \
		echo "cannot create $(DEMO_VENV) with $(DEMO_PYTHON) (on Debian: apt-get install python3-venv)"; \
		rm -rf $(DEMO_VENV); exit 1; }
	$(DEMO_VENV)/bin/python -m pip install -q --disable-pip-version-check -r examples/python/requirements.txt
	$(DEMO_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
	rm -rf $(DEMO_DIR)
	$(DEMO_VENV)/bin/python -m pyroscope run --output-dir $(DEMO_DIR) examples/python/shop.py
	$(MAKE) --no-print-directory demo-node demo-ruby

# The C example (examples/c), profiling itself through the core's C API.
demo-c: build
	$(BUILD)/demo --seconds 5 --output-dir $(DEMO_DIR)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(RELEASE_BUILD)

# Per-binding targets (test-node, test-ruby, ...) live beside this file.
include $(wildcard mk/*.mk)
