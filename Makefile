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

.PHONY: serve test browser-deps
serve: $(VENV)/.runtime
	mkdir -p var
	$(BIN)/gunicorn -c gunicorn.conf.py app:app

browser-deps: $(VENV)/.test
	sh scripts/install-browser.sh

test: $(VENV)/.test browser-deps
	$(BIN)/python -m pytest -q
