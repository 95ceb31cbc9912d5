# The Ruby binding on CRuby 3.3 and 3.4, Debian unstable's ruby3.3 and
# experimental's ruby3.4, in the sid chroot (mk/sid-chroot.mk): lanes
# test-ruby-3.3 and test-ruby-3.4 of `make test`. Each installs the gem
# `ruby-gem` made on the host into its own gem home (build/ruby-3.x, the
# extension compiled by that Ruby) and runs the whole minitest suite, the
# checkout bind-mounted at its own path, Go (GOROOT and GOCACHE, where the
# host's go-tools left `go tool pprof`) bind-mounted for the tests' decoder.
# The tests' webrick and minitest are Debian's. `make test-ruby-compat` runs
# the two lanes alone.
SID_RUBIES := 3.3 3.4
SID_RUBY_LANES := $(addprefix test-ruby-,$(SID_RUBIES))
RUBY_LANES := test-ruby $(SID_RUBY_LANES)

.PHONY: test-ruby-compat $(SID_RUBY_LANES)
$(SID_RUBY_LANES): test-ruby-%: ruby-gem sid-chroot go-tools
	@$(LANE_CMD) env IN_CHROOT_BIND="$(if $(GO),$(GO_ROOT) $(GO_CACHE))" \
	  $(IN_SID) env PATH=$(if $(GO),$(GO_ROOT)/bin:)/usr/local/bin:/usr/bin:/bin \
	  $(if $(GO),GOCACHE=$(GO_CACHE)) \
	  make --no-print-directory ruby-install ruby-suite RUBY=ruby$* GEM=gem$* RUBY_BUILD=$(BUILD)/ruby-$*

test-ruby-compat: $(SID_RUBY_LANES)
