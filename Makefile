# braid: the two commands in README.md are `make demo` and `make test`.
# Every target installs what is missing first (scripts/install-deps).

PYTHON ?= python3
export PYTHONPATH := $(CURDIR)/eval:$(CURDIR)/kernel:$(CURDIR)/defenses
export MPLCONFIGDIR := $(CURDIR)/.cache/matplotlib

.PHONY: deps kernel demo test bench results help

help:
	@echo "make demo   - build braid's kernel (cached), boot it, aggregate two emulated"
	@echo "              WANs with MPTCP and print a report (out/demo/)"
	@echo "make test   - the whole test suite: lint, host tests, VM tests"
	@echo "make kernel - only build (or reuse) the kernel"
	@echo "make bench  - scheduler benchmark: braid schedulers vs default (results/bench-sched.json)"
	@echo "make results - RESULTS.md from the recorded results in results/ (no measurement)"

deps:
	@./scripts/install-deps

kernel: deps
	@kernel/build

# scripts/demo builds everything its panes run (braid-proxy, gwsteer, the
# validator, the kernel) from a clean checkout, prints each stage's time and
# runs the failover pane on this machine's kernel before booting braid's.
demo:
	@./scripts/demo

test: deps
	@./scripts/test

bench: kernel
	@kernel/vm run --timeout 7200 -- $(PYTHON) -m braid_eval.bench.sched --schedulers default hywf bernoulli delaybal redundant --out results/bench-sched.json

# No measurement: the page from the committed JSON under results/.
results:
	@$(PYTHON) -m braid_eval.analysis.summary --out results --page RESULTS.md
