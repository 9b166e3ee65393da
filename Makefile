# braid: the two commands in README.md are `make demo` and `make test`.
# Every target installs what is missing first (scripts/install-deps).

PYTHON ?= python3
export PYTHONPATH := $(CURDIR)/eval:$(CURDIR)/kernel
# matplotlib's font cache is built once on the host (fast) and reused by the
# VM, where building it under TCG takes minutes.
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib

.PHONY: deps kernel demo test bench help

help:
	@echo "make demo   - build braid's kernel (cached), boot it, aggregate two emulated"
	@echo "              WANs with MPTCP and print a report (out/demo/)"
	@echo "make test   - the whole test suite: lint, host tests, VM tests"
	@echo "make kernel - only build (or reuse) the kernel"
	@echo "make bench  - scheduler benchmark: braid schedulers vs default"

deps:
	@./scripts/install-deps

kernel: deps
	@kernel/build

# braid-proxy is built here, not in the VM (the guest's CPU is emulated).
# The failover pane runs first, on this machine's kernel (gwsteer does not
# need braid's; mptcpd under emulation would take minutes); the report in
# the VM includes it. A failed pane fails the demo after the rest has run.
demo: kernel
	@$(PYTHON) -c 'import matplotlib.pyplot'
	@cd proxy && go build -o $(CURDIR)/out/proxy-bin/ ./cmd/braid-proxy
	@$(MAKE) -s -C mptcpd-plugins gwsteer.so
	@rm -f out/demo/failover.txt; pane=0; \
	$(PYTHON) -m braid_eval.demo_failover --out out/demo || pane=$$?; \
	BRAID_PROXY_BIN=$(CURDIR)/out/proxy-bin kernel/vm run --timeout 900 -- \
		$(PYTHON) -m braid_eval.demo --out out/demo || exit $$?; \
	exit $$pane

test: deps
	@./scripts/test

bench: kernel
	@kernel/vm run --timeout 7200 -- $(PYTHON) -m braid_eval.bench_sched --schedulers default hywf bernoulli delaybal redundant
