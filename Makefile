# Lorehouse developer entry points. `make demo` and `make test` work from a fresh clone:
# they create .venv and install everything on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export LOREHOUSE_DATA_DIR ?= $(CURDIR)/.lorehouse
export DAGSTER_HOME ?= $(LOREHOUSE_DATA_DIR)/dagster_home
# Keep third-party libraries off the network (weights, cost maps, telemetry).
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export UNSTRUCTURED_DISABLE_NOTICE := 1
export DO_NOT_TRACK := 1
export DAGSTER_DISABLE_TELEMETRY := 1

.PHONY: install demo test lint dev serve bench sample-corpus clean

# System packages: Tesseract reads scanned PDF pages when LOREHOUSE_PDF_OCR_LANGUAGES is set;
# Chromium is the browser the chat page's tests drive (Playwright, the system browser);
# PostgreSQL is the Dagster instance storage of the shared-instance test (as on a cluster).
PG_CTL := $(firstword $(wildcard /usr/lib/postgresql/*/bin/pg_ctl) $(shell command -v pg_ctl))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q

$(STAMP): pyproject.toml constraints.txt
	{ command -v tesseract && command -v chromium && test -n "$(PG_CTL)"; } >/dev/null \
		|| $(SUDO) apt-get update -q
	command -v tesseract >/dev/null || $(APT_INSTALL) tesseract-ocr
	command -v chromium >/dev/null || $(APT_INSTALL) --no-install-recommends chromium
	test -n "$(PG_CTL)" || $(APT_INSTALL) --no-install-recommends postgresql
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: pipelines/dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp pipelines/dagster.yaml $@

demo: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/lorehouse materialize
	$(BIN)/lorehouse docs
	$(BIN)/lorehouse search "How many weeks of parental leave do primary caregivers get?" --top-k 3
	$(BIN)/lorehouse ask "How many weeks of parental leave do primary caregivers get?" --trace

# Tests run in TEST_WORKERS processes, one test file per process at a time (so a module's
# fixtures are built once), in the order tests/conftest.py gives them: slow files first.
# (pytest-xdist would start the files holding the most tests first, leaving the long
# single-test builds to run alone at the end, about a minute of 13-14.) The tests marked
# `serial` measure latency and run alone afterwards. The 15 slowest tests are listed at the
# end: the suite must stay under 15 minutes on 2 cores, and this shows where it goes.
TEST_WORKERS ?= 2

# Both runs share one fresh folder for the sample corpus's build (tests/conftest.py), so it is
# materialized once per `make test`.
test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	export TEST_SAMPLE_STORE_DIR="$$(mktemp -d)" && trap 'rm -rf "$$TEST_SAMPLE_STORE_DIR"' EXIT \
		&& $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
			-m "not benchmark and not serial" --durations=15 \
		&& $(BIN)/pytest -m serial

# `dg dev` finds the code location in pyproject.toml's [tool.dg] and runs it in .venv.
dev: install $(DAGSTER_HOME)/dagster.yaml
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/dg dev -h 127.0.0.1 -p 3000

serve: install
	$(BIN)/lorehouse serve

bench: install
	$(BIN)/python bench/parse.py
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/ask.py

sample-corpus: install
	$(BIN)/python scripts/make_sample_corpus.py

clean:
	rm -rf $(LOREHOUSE_DATA_DIR)
