# One-stop checks. `make test` builds .venv with the pinned packages and runs everything.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python

.PHONY: example test venv lint bench clean

example:
	$(PY) sub-skills/distributed-training-backends/scripts/validate_backend_config.py \
	  sub-skills/distributed-training-backends/examples/fsdp2.yaml

$(VENV)/.installed: requirements-test.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	# DALLE-pytorch is tested without its heavy dependencies (see references/versions.md)
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps dalle-pytorch==1.6.6
	touch $@

venv: $(VENV)/.installed

lint:
	$(PY) scripts/check_bundle.py --root-name pytorch-distributed-training

test: venv
	$(VPY) -m pytest

bench: venv
	$(VPY) benchmarks/bench_availability.py
	@if [ -f benchmarks/bench_validator.py ]; then $(VPY) benchmarks/bench_validator.py; fi
	@if [ -f benchmarks/bench_triage.py ]; then $(VPY) benchmarks/bench_triage.py; fi

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
