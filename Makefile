# Two commands for a newcomer: `make demo` and `make test`. Both create .venv and install
# the project into it when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-harness bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# compat mode: a plain path entry; the default editable finder costs ~20 ms per process
	$(BIN)/python -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/demo.sh

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m "not slow and not harness_e2e"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m slow

# the real Claude Code, Codex and Gemini CLI against a mock model on 127.0.0.1 (they are
# found in $$AGENT_REGISTRY_HARNESS_BIN or on PATH; .ci/run installs them from npm)
test-harness: $(STAMP)
	$(BIN)/python -m pytest -q -m harness_e2e tests/e2e

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/guard_bench.py
	$(BIN)/python bench/wiki_bench.py
	$(BIN)/python bench/sync_bench.py
	$(BIN)/python bench/mcp_bench.py
	$(BIN)/python bench/messages_bench.py
	$(BIN)/python bench/scale_bench.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
