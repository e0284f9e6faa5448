# One-stop checks. `make test` builds .venv with the pinned packages and runs everything that
# needs nothing outside the repository; `make test-corpus` adds the real-world config corpus.
# `make test-no-fp16` / `make test-fp16` run the same tests as a CPU without / with oneDNN fp16
# kernels (DeepSpeed's CPU accelerator refuses / accepts fp16), whatever this CPU is.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# The out-of-tree corpus of published configs (opt-in layer; CI has it beside the clone).
CORPUS ?= ../shared/corpus

# Extra pytest arguments for the capability runs, e.g. PYTEST_ARGS="tests/failure_triage -x"
PYTEST_ARGS ?=
# pytest-xdist: one worker per usable core (at most 8; none on a one-core machine: the run stays in
# pytest's own process), each test directory on one worker so its session fixtures (real launcher and
# oracle runs) start once, as in a serial run (tests/conftest.py). PYTEST_PARALLEL= runs serially.
PYTEST_PARALLEL ?= -n auto --dist loadscope

.PHONY: help example test test-corpus test-no-fp16 test-fp16 venv lint bench clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):.*## (.*)/  make \1\t\2/' | expand -t 22

example: ## run the validator on a shipped example config
	$(PY) sub-skills/distributed-training-backends/scripts/validate_backend_config.py \
	  sub-skills/distributed-training-backends/examples/fsdp2.yaml

$(VENV)/.installed: requirements-test.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	# DALLE-pytorch is tested without its heavy dependencies (see references/versions.md)
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps dalle-pytorch==1.6.6
	touch $@

venv: $(VENV)/.installed ## build .venv with the pinned packages (first run needs the package index)

lint: ## run the bundle linter
	$(PY) scripts/check_bundle.py --root-name pytorch-distributed-training

test: venv ## run every test that needs nothing outside the repository
	$(VPY) -m pytest $(PYTEST_PARALLEL)

test-corpus: venv ## run the corpus layer: tests on the configs in CORPUS (default ../shared/corpus)
	@test -d "$(CORPUS)" || { echo "corpus not found at $(CORPUS): set CORPUS=PATH" >&2; exit 2; }
	PDT_CORPUS="$(abspath $(CORPUS))" $(VPY) -m pytest $(PYTEST_PARALLEL) -m corpus

test-no-fp16: venv ## run the tests as a CPU without oneDNN fp16 (AMD EPYC, most x86): PDT_FORCE_CPU_FP16=0
	PDT_FORCE_CPU_FP16=0 $(VPY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

test-fp16: venv ## run the tests as a CPU with oneDNN fp16 (AVX512-FP16, AMX-FP16): PDT_FORCE_CPU_FP16=1
	PDT_FORCE_CPU_FP16=1 $(VPY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

bench: venv ## print the benchmark figures (never part of the tests)
	$(VPY) benchmarks/bench_availability.py
	@if [ -f benchmarks/bench_validator.py ]; then $(VPY) benchmarks/bench_validator.py; fi
	@if [ -f benchmarks/bench_planner.py ]; then $(VPY) benchmarks/bench_planner.py; fi
	@if [ -f benchmarks/bench_triage.py ]; then $(VPY) benchmarks/bench_triage.py; fi
	@if [ -f benchmarks/bench_fr_dump.py ]; then $(VPY) benchmarks/bench_fr_dump.py; fi
	@if [ -f benchmarks/bench_lookup.py ]; then $(VPY) benchmarks/bench_lookup.py; fi
	$(VPY) benchmarks/bench_find_docs.py
	$(VPY) benchmarks/reading_cost.py --top 15

clean: ## remove .venv and test caches
	rm -rf $(VENV) .pytest_cache .hypothesis
