# The free-threaded CPython (3.13t, no GIL) lane of `make test`, test-python-3.13t: the whole
# Python suite (walker and package) on an interpreter built with
# --disable-gil from the source tarball Debian serves for its python3.13
# package (SHA-256 from Debian's Sources index), once per machine, into
# PYTHON_FT_PREFIX (a stamp there records version, checksum and flags; about
# 5 minutes on two cores). Point PYTHON_FT_PREFIX at an existing build to
# reuse it (e.g. one shared by several checkouts).
PYTHON_FT_VERSION := 3.13.5
PYTHON_FT_SHA256 := 93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
PYTHON_FT_PREFIX ?= $(BUILD)/python-ft-$(PYTHON_FT_VERSION)

PY_FT_LANE := test-python-3.13t

.PHONY: python-ft test-python-ft $(PY_FT_LANE) python-ft-suite
python-ft: deps
	@JOBS=$(JOBS) tests/runtimes/build_python_ft.sh $(PYTHON_FT_VERSION) python3.13 \
		$(PYTHON_FT_SHA256) $(PYTHON_FT_PREFIX)

# The lane itself: a missing or failed interpreter build is a failure.
test-python-ft: $(PY_FT_LANE)
$(PY_FT_LANE): python-ft
	+@$(LANE) python-ft-suite

python-ft-suite:
	@set -e; mkdir -p $(BUILD); py=$(PYTHON_FT_PREFIX)/bin/python3; \
	$(call py_venv,$$py,bindings/python/tests/requirements-ft.txt); \
	echo "== $$($$v/bin/python -VV | head -1) (free-threaded) =="; \
	$$v/bin/python -c 'import sys; assert not sys._is_gil_enabled(), "the GIL is on"'; \
	PN_PAGE_UI_ONCE=skip $$v/bin/python -m pytest -q -p no:cacheprovider bindings/python/tests/walker \
		bindings/python/tests/package
