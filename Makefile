# The README's two commands: `make serve` and `make test`. Both build .venv from
# nothing, so a fresh clone needs only Python 3.11+ and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.test: requirements-test.txt requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-test.txt
	touch $@

.PHONY: serve test test-fast browser-deps torch-deps
serve: $(VENV)/.runtime
	mkdir -p var
	$(BIN)/gunicorn -c gunicorn.conf.py app:app

browser-deps: $(VENV)/.test
	sh scripts/install-browser.sh

# torch, transformers and peft for the meta-device and measured-bytes tests: about 30 s
# from a local CPU wheel; always in CI (where those tests may not skip), else with WITH_TORCH=1.
torch-deps: $(VENV)/.test
	@if [ "$(CI)" = "true" ] || [ -n "$(WITH_TORCH)" ]; then \
		$(BIN)/pip install --quiet -r bench/accuracy/requirements.txt; \
	else echo "torch tests: skipped unless CI=true or WITH_TORCH=1 (make test WITH_TORCH=1)"; fi

# The suite runs on every core (pytest-xdist); PYTEST_ARGS adds to it (make test PYTEST_ARGS="-k slack").
# Bytecode is cached even where the environment sets PYTHONDONTWRITEBYTECODE: every live gunicorn and CLI
# subprocess would otherwise compile the package from source, and pytest would rewrite every test module again.
test: $(VENV)/.test browser-deps torch-deps
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto $(PYTEST_ARGS)

# The edit loop: no browser, no live server, no torch; a minute or two.
test-fast: $(VENV)/.test
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto -m "not browser and not server" \
		--ignore-glob='tests/test_*_measured.py' --ignore=tests/test_catalog_meta.py $(PYTEST_ARGS)
