# Go builds the tests' independent decoders: `go tool pprof` (the C and Ruby
# tests read our pprof with it) and tests/otlp_go (the Collector's pdata
# decoder, test_otlp). Since Go 1.24 `go tool pprof` is compiled on first use
# (over a CPU-minute, several minutes on a loaded machine) and kept in
# GOCACHE; `go-tools` does both builds once, before the suites, so no test's
# timeout pays for them. CGO_ENABLED=0 for every go command of the tests:
# the tool's cache entry then does not depend on the C compiler, and the
# Ruby lanes in the sid chroot (tests/runtimes/in_chroot.sh, with GOROOT and
# GOCACHE bind-mounted) find the one the host built. Without Go, the C tests
# skip their Go checks and go-tools does nothing.
GO ?= $(firstword $(shell command -v go 2>/dev/null) $(wildcard /usr/local/go/bin/go))
export CGO_ENABLED := 0
GO_ROOT = $(if $(GO),$(shell $(GO) env GOROOT))
GO_CACHE = $(if $(GO),$(shell $(GO) env GOCACHE))
GO_BUILD_DIR := $(abspath $(BUILD))/go

.PHONY: go-tools
go-tools:
	@if [ -n "$(GO)" ]; then \
	  echo "go-tools: go tool pprof and tests/otlp_go (compiled once, then cached)"; \
	  $(GO) tool pprof -h >/dev/null 2>&1 || { $(GO) tool pprof -h; exit 1; }; \
	  cd tests/otlp_go && GOFLAGS='-mod=mod -modcacherw' GOTOOLCHAIN=local \
	    GOMODCACHE=$(GO_BUILD_DIR)/mod GOCACHE=$(GO_BUILD_DIR)/cache GOPATH=$(GO_BUILD_DIR)/path \
	    $(GO) build -o $(GO_BUILD_DIR)/otlp_check .; \
	fi
