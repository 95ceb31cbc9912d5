# CPython 3.14 and 3.15 lanes: Debian unstable's interpreters, in a chroot
# built once per machine by tests/runtimes/sid_chroot.sh (a few minutes from
# scratch, a no-op afterwards). SID_CHROOT may name one that exists (e.g.
# make test SID_CHROOT=/work/cache/sid). tests/runtimes/in_chroot.sh runs each
# lane inside it with this checkout bind-mounted at the same path (mounts
# private to the lane: gone when it ends, pass or fail); the lane's virtual
# environment is $(BUILD)/venv/cpython-31x, made and used only in the chroot.
#   make test-python-sid     both lanes (part of `make test`)

SID_CHROOT ?= $(BUILD)/sid
SID_PYTHONS := 3.14 3.15
PY_SID_LANES := $(addprefix test-python-sid-,$(SID_PYTHONS))
# One stamp per chroot path, so that another SID_CHROOT is checked too.
SID_STAMP := $(BUILD)/.sid-chroot$(subst /,-,$(abspath $(SID_CHROOT))).stamp

.PHONY: test-python-sid test-python-in-chroot

# Rerun when the script changes; the script itself checks its package list.
$(SID_STAMP): tests/runtimes/sid_chroot.sh
	@mkdir -p $(BUILD)
	tests/runtimes/sid_chroot.sh $(SID_CHROOT)
	@touch $@

test-python-sid: $(SID_STAMP)
	$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(PY_SID_LANES)

test-python-sid-%: $(SID_STAMP)
	@tests/runtimes/in_chroot.sh $(SID_CHROOT) $(CURDIR) \
		make --no-print-directory test-python-in-chroot PY=python$* BUILD=$(BUILD)

# Runs inside the chroot: the whole Python suite on $(PY), which must be
# there (a missing interpreter fails the lane, it is never skipped).
test-python-in-chroot:
	@set -e; command -v $(PY) >/dev/null || { echo "$(PY) is missing in the chroot"; exit 1; }; \
	$(call py_venv,$(PY)); \
	echo "== $$($$v/bin/python -V) (Debian unstable chroot) =="; \
	$$v/bin/python -m pytest -q -p no:cacheprovider bindings/python/tests/walker \
		bindings/python/tests/package
