# CPython 3.14 and 3.15: Debian unstable's interpreters, in the sid chroot
# (mk/sid-chroot.mk), lanes test-python-3.14 and test-python-3.15 of
# `make test`. Each runs the whole Python suite inside the chroot with this
# checkout bind-mounted at its own path; its virtual environment is
# $(BUILD)/venv/cpython-31x, made and used only in the chroot. A missing
# interpreter fails the lane, it is never skipped.
PY_SID_VERSIONS := 3.14 3.15
PY_SID_LANES := $(addprefix test-python-,$(PY_SID_VERSIONS))

.PHONY: $(PY_SID_LANES)
$(PY_SID_LANES): test-python-%: sid-chroot
	@$(LANE_CMD) $(IN_SID) make --no-print-directory python-suite \
		PY=/usr/bin/python$* PY_VERSION=$* BUILD=$(BUILD)
