# pyroscope-native: the front door.
#   make demo       build and run the Python, Node and Ruby example apps, profiles + flame graphs
#                   in ./pyroscope-profiles (Node's under node/, Ruby's under ruby/)
#   make demo-c     the same with the C example
#   make test       install what is missing, build, run every test suite
#   make test-asan  core tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-release  core tests built as Release (-O3): -Werror must hold there too
#   make test-valgrind  core tests under valgrind memcheck (part of `make test`)
#   make test-python    Python-side tests for CPython 3.10-3.13 (part of `make test`)
#   make test-node      Node binding tests, mocha (part of `make test`; mk/node.mk)
#   make test-ruby      Ruby gem tests, minitest (part of `make test`; mk/ruby.mk)
#   make bench      benchmarks (never part of `make test`): core, Python, Node, Ruby
#   make proto      regenerate core/gen from proto/

SHELL := /bin/bash
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
RELEASE_BUILD ?= build-release
DEMO_DIR ?= pyroscope-profiles
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

# Debian packages the build and the tests need (libssl-dev: the tests' TLS
# server; libcurl4-openssl-dev brings libcurl4, which uploads load; chromium:
# the report page test loads the page headless; ruby-dev: the gem's C
# extension). Node.js 20 with its headers comes with the machine.
APT_PACKAGES := build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev \
	libcurl4-openssl-dev zlib1g-dev python3-dev libssl-dev valgrind chromium ruby ruby-dev

.PHONY: all deps build test test-c test-valgrind test-python test-asan test-release proto bench demo demo-c clean

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

# The C suites first; then the language suites, JOBS at a time (each Python
# version, Node, Node 22/24 and Ruby is a lane of its own), each lane's output printed
# together when it ends. Most of their time is spent waiting on profiling
# periods and child processes, so two lanes on two cores save minutes.
test: build test-c test-valgrind
	@[ -n "$(strip $(PYTHONS))" ] || { echo "no CPython 3.10-3.13 found"; exit 1; }
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(PY_LANES) test-node test-node-compat test-ruby

# Python tests, for each CPython we support that is on the machine (pyenv's
# 3.10/3.11/3.12/3.13, else python3.1x on PATH); pytest is installed if missing.
PYTHONS ?= $(shell for v in 3.10 3.11 3.12 3.13; do \
	p=$$(ls -d $$(pyenv root 2>/dev/null)/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -1); \
	[ -n "$$p" ] || p=$$(command -v python$$v 2>/dev/null); \
	[ -n "$$p" ] && echo $$p; done)

# One virtual environment per interpreter under $(BUILD)/venv/<tag>, with
# the test requirements and this package installed (rebuilt every run).
define py_venv
v=$(BUILD)/venv/$$($(1) -c 'import sys; print(sys.implementation.cache_tag)'); \
[ -x $$v/bin/python ] || $(1) -m venv $$v; \
$$v/bin/python -m pip install -q --disable-pip-version-check -r bindings/python/tests/requirements.txt; \
flock $(BUILD)/.pip-install.lock \
	$$v/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
endef
# (flock: lanes in parallel would share setuptools' build/ and egg-info.)

# One lane per interpreter: test-python-lane-N runs the N-th of PYTHONS. The
# report page's browser tests (test_report_ui.py: the C page, the same for
# every interpreter) run in the first lane only.
PY_LANES = $(addprefix test-python-lane-,$(shell seq $(words $(PYTHONS))))

test-python: build
	@[ -n "$(strip $(PYTHONS))" ] || { echo "no CPython 3.10-3.13 found"; exit 1; }
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(PY_LANES)

test-python-lane-%:
	@set -e; py=$(word $*,$(PYTHONS)); \
	$(call py_venv,$$py); \
	echo "== $$($$v/bin/python -V) =="; \
	$(if $(filter-out 1,$*),PN_PAGE_UI_ONCE=skip) $$v/bin/python -m pytest -q -p no:cacheprovider \
		bindings/python/tests/walker bindings/python/tests/package

test-c: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Every C test under memcheck: no leaks, no invalid accesses. Timing checks
# relax themselves under PN_TEST_SLOW (threads are serialised by valgrind).
test-valgrind: build
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
	$(MAKE) --no-print-directory bench-node bench-ruby

# Python benchmarks against pyroscope-io and py-spy (each in its own venv
# under $(BUILD)/bench, from PyPI); BENCH_ARGS=--quick for a short check.
BENCH_PYTHON ?= python3
.PHONY: bench-python
bench-python: build
	$(BENCH_PYTHON) bench/python/run.py --build-dir $(BUILD) \
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
