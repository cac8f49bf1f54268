# Two commands do all the set-up: `make test` and `make demo` create what they need.
SHELL := /bin/bash
# .python-version pins 3.12 (the Lambda runtime); pyenv's shim resolves python3.12.
PYTHON ?= $(shell command -v python3.12 2>/dev/null || pyenv which python3.12 2>/dev/null || echo python3.12)
VENV := .venv
BIN := $(VENV)/bin
# aws-sam-cli pins its own boto3 and click: it gets a tool environment of its own.
SAM_VENV := .venv-sam
SAM_CLI_VERSION := 1.170.0
# uv compiles the layer's hashed lock (`make layer-lock`): one wheel with its own binary, in a
# tool environment of its own like SAM CLI's, so the dev environment does not carry it.
TOOLS_VENV := .venv-tools
UV_VERSION := 0.13.9
LAYER := layers/shared
# The security scanners (`make scan`, `make audit-deps`): pinned, in an environment of their own
# (checkov pins its own boto3 and more), never part of the dev environment or the layer.
SCAN_VENV := .venv-scan
SCANNERS := checkov==3.3.30 bandit==1.9.4 pip-audit==2.10.1

.PHONY: all venv sam-tools layer-lock scan audit-deps lint typecheck docs test test-quick demo bench bench-polling bench-receiver bench-pipeline bench-cold-start bench-sweep bench-latency bench-results bench-scale bench-submit iam-report simulator clean

all: test

$(BIN)/.installed: pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $@

venv: $(BIN)/.installed

$(SAM_VENV)/.installed:
	@test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	@touch $@

sam-tools: $(SAM_VENV)/.installed

$(TOOLS_VENV)/.installed:
	@test -x $(TOOLS_VENV)/bin/python || $(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION)
	@touch $@

# The layer's lock, $(LAYER)/requirements.txt: every distribution the layer installs (what
# requirements.in names and all they need), at constraints.txt's versions, with the sha256 of
# each file the registry has for that version (the arm64 wheels the layer build picks among
# them). Run after changing requirements.in or one of those versions in constraints.txt;
# tests/template/test_layer_lock.py fails until the lock agrees. Resolved for the Lambda's
# interpreter and platform (template.yaml: python3.12, arm64), so markers are Lambda's.
layer-lock: $(TOOLS_VENV)/.installed
	$(TOOLS_VENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.12 \
		--python-platform aarch64-manylinux2014 --constraint constraints.txt \
		--custom-compile-command "make layer-lock" \
		--output-file $(LAYER)/requirements.txt $(LAYER)/requirements.in

$(SCAN_VENV)/.installed:
	@test -x $(SCAN_VENV)/bin/python || $(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet $(SCANNERS)
	@touch $@

# The scanners a security review runs (README, "Security"): each accepted finding is skipped
# where it is justified (.checkov.yaml, a resource's Metadata, pyproject's [tool.bandit], a
# `# nosec` on its line), so any new finding fails the target.
scan: venv $(SCAN_VENV)/.installed
	$(BIN)/cfn-lint template.yaml
	$(SCAN_VENV)/bin/checkov --skip-download -f template.yaml --config-file .checkov.yaml
	$(SCAN_VENV)/bin/bandit -c pyproject.toml -q -r layers functions scrape_pipeline_ops scrape_pipeline_local

# Every pinned version (dev and layer) against the PyPA advisory database; needs pypi.org's JSON
# API and osv.dev, so it fails (packages not audited) on a machine without them.
audit-deps: $(SCAN_VENV)/.installed
	$(SCAN_VENV)/bin/pip-audit --strict --disable-pip --no-deps -r constraints.txt -r $(LAYER)/requirements.txt

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor,
# or a link out of docs/ to a file the repository lacks, fails it (never --quiet: it hides the
# warnings --strict counts). PYTHONPATH: the settings table is rendered from this checkout's
# declarations (docs/hooks.py).
docs: venv
	PYTHONPATH=layers/shared:. NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Two workers on this 2-core machine; a file's tests stay together (module-scoped stacks).
test: lint typecheck docs sam-tools
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The edit loop's check, under a minute on 2 cores: the unit tests and the tests on in-process
# moto (ledger, events, receiver), without a local stack, the simulator's server or a
# subprocess. A subset: CI and a change's last check run `make test`.
test-quick: venv
	$(BIN)/python -m pytest -n 2 -q tests/unit tests/ledger tests/events tests/receiver

# The whole pipeline on this machine under a chaos profile; exits 1 if anything was lost or
# processed twice. DEMO_ARGS="--jobs 500 --chaos heavy --seed 3" to change the run. Not echoed
# (`@`): the report is alone on stdout.
demo: venv
	@$(BIN)/python -m scrape_pipeline_local.demo $(DEMO_ARGS)

# Benchmarks print their figures, save bench/results/*.json and update the README's tables.
bench: bench-polling bench-receiver bench-pipeline bench-cold-start bench-sweep bench-latency
	$(BIN)/python -m bench.results_report

# Tables and charts of every mode in bench/RESULTS.md, drawn from bench/results/*.json (measures
# nothing: run the benchmarks first).
bench-results: venv
	$(BIN)/python -m bench.results_report

# Requests per job at 10, 50 and 200 concurrent jobs for each poller and the pipeline (AWS calls
# counted for the cost model): bench/results/sweep.json.
bench-sweep: venv
	$(BIN)/python -m bench.sweep

# The demo's settle-to-stored latencies, without faults and under chaos: bench/results/latency.json.
bench-latency: venv
	$(BIN)/python -m bench.latency

bench-polling: venv
	$(BIN)/python -m bench.polling

bench-receiver: venv
	$(BIN)/python -m bench.receiver

bench-pipeline: venv
	$(BIN)/python -m bench.pipeline

# Each handler's import from `sam build`'s output, with and without the layer's byte code, next to
# a bare `import boto3` (a python3.12 venv holding only boto3 is made once under $TMPDIR).
bench-cold-start: venv sam-tools
	$(BIN)/python -m bench.cold_start

# The reconciler at 1, 10 and 50 settled jobs/s with 0/20/100 % of webhooks dropped, on the
# template's schedule (about 10-20 min; not part of `make bench`). Writes bench/results/scale.json
# and its section of bench/RESULTS.md. BENCH_SCALE_ARGS="--rates 1 10" to run fewer points.
bench-scale: venv
	$(BIN)/python -m bench.scale $(BENCH_SCALE_ARGS)

# 20,000 URLs submitted against the simulator's rate limit, async and batch, then with the
# submitter killed every ~2,000 URLs and 1 % of answers lost (about 20-25 min; not part of
# `make bench`): bench/results/submit.json and its section of bench/RESULTS.md.
bench-submit: venv
	$(BIN)/python -m bench.submit $(BENCH_SUBMIT_ARGS)

# What each function and the operator CLI called on the local stack, each call's verdict against
# its IAM policy, and the allowed actions left unused (tests/iam/test_least_privilege.py).
iam-report: venv
	IAM_REPORT=bench/results/iam.json $(BIN)/python -m pytest -n 0 -q -p no:logging tests/iam/test_least_privilege.py

simulator: venv
	$(BIN)/geonode-sim

clean:
	rm -rf $(VENV) $(SAM_VENV) $(TOOLS_VENV) $(SCAN_VENV) .aws-sam site .pytest_cache .mypy_cache .ruff_cache
