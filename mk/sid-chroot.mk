# The Debian unstable chroot with today's runtimes (CPython 3.14/3.15, CRuby
# 3.3/3.4; tests/runtimes/sid_chroot.sh), built once per machine: the script
# keeps a stamp of its package list in the chroot ($(SID_CHROOT)/.pn-stamp)
# and returns at once when it matches, so every lane that needs the chroot
# depends on `sid-chroot`. SID_CHROOT (default $(BUILD)/sid, set in the
# Makefile) =/elsewhere shares one between clones.
#   $(IN_SID) CMD...   runs CMD inside it, this checkout bind-mounted at its
#                      own path, from the same directory (tests/runtimes/in_chroot.sh)
IN_SID = tests/runtimes/in_chroot.sh $(SID_CHROOT) $(CURDIR)

.PHONY: sid-chroot
sid-chroot:
	@tests/runtimes/sid_chroot.sh $(SID_CHROOT)
