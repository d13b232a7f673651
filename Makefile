# Two entry points for a fresh machine (see README.md): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CAPE := $(VENV)/bin/cape
DEMO_DATA ?= pbmc68k_reduced
DEMO_OUT ?= out/$(DEMO_DATA)

.PHONY: setup demo test lint clean

setup: $(VENV)/.installed

# On a machine without an NVIDIA GPU, torch==2.13.0 goes in first: it is the CPU build that the
# registry mirror serves from disk; a bare `torch` requirement would pull several GB of CUDA wheels.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q torch==2.13.0; fi
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Uses workflows/$(DEMO_DATA).yaml when it exists (dataset-specific settings, each explained there).
demo: setup
	$(CAPE) run $(DEMO_DATA) --workdir cape_work --out $(DEMO_OUT) \
		$(if $(wildcard workflows/$(DEMO_DATA).yaml),--config workflows/$(DEMO_DATA).yaml)

test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check cape_pipeline tests

clean:
	rm -rf cape_work out
