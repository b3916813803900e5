# Commands that work on a fresh clone: `make demo`, `make demo-dpot`, `make demo-mesh`, `make test` and `make docs`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch 2.13 lies on disk on our machines; pinning it avoids a multi-GB CUDA download.
TORCH := torch==2.13.0

.PHONY: demo demo-dpot demo-mesh test test-fast docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(BIN)/opformer quickstart --out runs/quickstart

demo-dpot: $(VENV)/.installed
	$(BIN)/opformer quickstart dpot --out runs/quickstart-dpot

demo-mesh: $(VENV)/.installed
	$(BIN)/opformer quickstart mesh --out runs/quickstart-mesh

test: $(VENV)/.installed
	$(BIN)/python -m pytest

# The tests not marked slow: a check of a minute or so while working.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow"

$(VENV)/.docs-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@

# The API reference and the pages of docs/ as a site in site/; any warning fails the build.
docs: $(VENV)/.docs-installed
	$(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf runs site .pytest_cache
