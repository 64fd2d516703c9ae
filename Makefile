# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install
# the project into it when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGE_STAMP := $(VENV)/.installed-package

.PHONY: demo test test-intro test-slow test-harness test-harness-latest bench bench-docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	# pip 25.2 and later write console scripts that do not import re (3 ms of every
	# agent-registry command); Python 3.11 bundles pip 23. Offline, the bundled one will do.
	$(BIN)/python -m pip install -q --upgrade 'pip>=25.2' 2>/dev/null || echo "pip not upgraded (offline?)"
	# compat mode: a plain path entry; the default editable finder costs ~20 ms per process
	$(BIN)/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	touch $(STAMP) $(PACKAGE_STAMP)

# the demo needs the package only (click, ruamel.yaml, whoosh): seconds, not the test stack.
# A venv without pip is made in a second (ensurepip takes ten); demo/install.py puts the
# dependencies in with $(PYTHON)'s own pip (pip >= 22.3 installs into another interpreter;
# uv when it is on PATH)
# and links the checkout without pip's build step (6 of its 10 CPU-seconds); else (exit 3)
# the full editable install
$(PACKAGE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) demo/install.py $(VENV) || \
	  $(PYTHON) -m pip --python $(BIN)/python install -q -e . --config-settings editable_mode=compat \
	    || { $(BIN)/python -m ensurepip >/dev/null && \
	         $(BIN)/python -m pip install -q -e . --config-settings editable_mode=compat; }
	touch $(PACKAGE_STAMP)

demo: $(PACKAGE_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/demo.sh

test-intro:
	@echo "make test: the first run installs the test stack into .venv (pytest, FastAPI, Playwright,"
	@echo "  schemathesis, langchain, the MCP SDK, Apprise: about 430 MB, a minute or two); then the"
	@echo "  suite runs on 2 workers, real git and real processes: about 5-10 minutes on 2 cores."
	@echo "  Skipped tests say why at the end (a missing Chromium, tmux, MCP Inspector …);"
	@echo "  make test-slow runs the long races and soaks."

# worksteal: a worker that runs out of tests takes half of the other's queue, so a few long
# races at the end do not leave one core idle
test: test-intro $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -rs -m "not slow and not harness_e2e"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist worksteal -q -rs -m slow

# the real Claude Code, Codex and Gemini CLI against a mock model on 127.0.0.1 (they are
# found in $$AGENT_REGISTRY_HARNESS_BIN or on PATH; .ci/run installs them from npm)
test-harness: $(STAMP)
	$(BIN)/python -m pytest -q -m harness_e2e tests/e2e

# the same tests with today's release of each agent CLI: npm's @latest of every one, installed
# (again, so a new release is taken) into a prefix of its own, apart from the pinned versions
# .ci/run installs into .venv-harness; prints the versions it ran
HARNESS_LATEST := .venv-harness-latest
LATEST_CLIS := @anthropic-ai/claude-code@latest @openai/codex@latest @google/gemini-cli@latest \
	@github/copilot@latest @qwen-code/qwen-code@latest opencode-ai@latest
test-harness-latest: $(STAMP)
	npm install --no-audit --no-fund --silent --prefix $(HARNESS_LATEST) $(LATEST_CLIS)
	@for cli in claude codex gemini copilot qwen opencode; do \
	  printf '%s: ' $$cli; $(HARNESS_LATEST)/node_modules/.bin/$$cli --version 2>&1 | head -n 1; done
	AGENT_REGISTRY_HARNESS_BIN="$(CURDIR)/$(HARNESS_LATEST)/node_modules/.bin" \
	  $(BIN)/python -m pytest -q -m harness_e2e tests/e2e

# every benchmark measures a wheel of the checkout installed in a fresh venv, as users
# install it (bench/install.py: built once, kept under bench/results/ while the sources
# are unchanged); --checkout on a benchmark measures the editable .venv instead
bench: $(STAMP)
	$(BIN)/python bench/install.py
	$(BIN)/python bench/run.py
	$(BIN)/python bench/guard_bench.py
	$(BIN)/python bench/wiki_bench.py
	$(BIN)/python bench/sync_bench.py
	$(BIN)/python bench/mcp_bench.py
	$(BIN)/python bench/messages_bench.py
	$(BIN)/python bench/backstop_bench.py
	$(BIN)/python bench/hook_bench.py
	# last: 16 and 48 clones saturate the machine, and its load lingers for minutes
	$(BIN)/python bench/scale_bench.py

# the same runs, writing the figures into the tracked docs/benchmarks.md (make bench
# writes bench/results/benchmarks.md, which git ignores: bench/report.py)
bench-docs:
	BENCH_WRITE_DOCS=1 $(MAKE) bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
