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
# Python keeps each module's compiled bytecode beside it. Where the shell sets
# PYTHONDONTWRITEBYTECODE, every process (each Dagster run and step is one) compiles
# dagster, lancedb and litellm from source again, which is half of loading the code location.
unexport PYTHONDONTWRITEBYTECODE
# mkdocs-material announces its successor on every build; the site builds with mkdocs 1.6.
export NO_MKDOCS_2_WARNING := 1

.PHONY: install install-dev demo test docs dev serve bench sample-corpus clean

# `make demo` installs what Lorehouse itself needs. `make test` adds the test tools and the
# system packages only tests use: Tesseract (scanned PDF pages, when
# LOREHOUSE_PDF_OCR_LANGUAGES is set), Chromium (the chat page's browser test, driven by
# Playwright without a browser download), PostgreSQL (the shared-instance test's Dagster
# storage, as on a cluster) and Debian's German manuals (the German golden set's corpus).
PG_CTL := $(firstword $(wildcard /usr/lib/postgresql/*/bin/pg_ctl) $(shell command -v pg_ctl))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q
DEV_STAMP := $(VENV)/.installed-dev-stamp
# The German evaluation corpus (evals/golden/SOURCES.md): Debian's German manuals, read in
# place under /usr/share.
GERMAN_DOC_PACKAGES := debian-reference-de developers-reference-de
GERMAN_DOCS := /usr/share/developers-reference/de/developers-reference.pdf
# uv installs the same packages as pip from the same indexes, resolving and unpacking in
# parallel: the install is most of a first `make demo`. It reads pip's configured indexes
# and, as pip does, takes the best version any of them offers.
UV := $(BIN)/uv
PIP_INDEXES = $(shell $(PYTHON) scripts/pip_index_args.py)
UV_INSTALL = $(UV) pip install --quiet --python $(BIN)/python $(PIP_INDEXES) \
	--index-strategy unsafe-best-match -c constraints.txt

$(UV):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt uv

$(STAMP): pyproject.toml constraints.txt overrides.txt | $(UV)
	$(UV_INSTALL) --override overrides.txt -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	{ command -v tesseract && command -v chromium && test -n "$(PG_CTL)" \
		&& test -f $(GERMAN_DOCS); } >/dev/null || $(SUDO) apt-get update -q
	command -v tesseract >/dev/null || $(APT_INSTALL) tesseract-ocr
	command -v chromium >/dev/null || $(APT_INSTALL) --no-install-recommends chromium
	test -n "$(PG_CTL)" || $(APT_INSTALL) --no-install-recommends postgresql
	test -f $(GERMAN_DOCS) || $(APT_INSTALL) --no-install-recommends $(GERMAN_DOC_PACKAGES)
	$(UV_INSTALL) -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

$(DAGSTER_HOME)/dagster.yaml: pipelines/dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp pipelines/dagster.yaml $@

demo: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/lorehouse materialize
	$(BIN)/lorehouse docs
	$(BIN)/lorehouse search "How many weeks of parental leave do primary caregivers get?" --top-k 3
	$(BIN)/lorehouse ask "How many weeks of parental leave do primary caregivers get?"
	@echo
	@echo "Next:"
	@echo "  make serve   then open http://127.0.0.1:8000/chat  (the API's reference: /docs)"
	@echo "  make dev     the Dagster UI at http://127.0.0.1:3000"
	@echo "  .venv/bin/lorehouse --help   search, ask and evaluate from the shell"
	@echo "  Your own documents: LOREHOUSE_SOURCE_URI (docs/getting-started.md)"

# Tests run in TEST_WORKERS processes, one test file per process at a time (so a module's
# fixtures are built once), in the order tests/conftest.py gives them: slow files first.
# (pytest-xdist would start the files holding the most tests first, leaving the long
# single-test builds to run alone at the end.) The tests marked `serial` measure latency, or
# start a swarm of processes (the shared Dagster instance), and run alone afterwards. The 15 slowest tests are listed at the
# end: the suite must stay under 15 minutes on 2 cores, and this shows where it goes.
TEST_WORKERS ?= 2

# Both runs share one fresh folder for the sample corpus's build (tests/conftest.py), so it is
# materialized once per `make test`.
test: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mkdocs build --strict --quiet --site-dir "$$(mktemp -d)"
	export TEST_SAMPLE_STORE_DIR="$$(mktemp -d)" && trap 'rm -rf "$$TEST_SAMPLE_STORE_DIR"' EXIT \
		&& $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
			-m "not benchmark and not serial" --durations=15 \
		&& $(BIN)/pytest -m serial

# The Dagster UI and daemon on workspace.yaml's code location (pipelines.definitions), at
# http://127.0.0.1:$(DEV_PORT); `make dev DEV_PORT=3100` where 3000 is taken.
DEV_PORT ?= 3000
dev: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(DEV_PORT)

# The documentation site at http://127.0.0.1:$(DOCS_PORT), rebuilt as pages change.
DOCS_PORT ?= 8001
docs: install-dev
	$(BIN)/python -m lorehouse.settings_docs
	$(BIN)/mkdocs serve -a 127.0.0.1:$(DOCS_PORT)

serve: install
	$(BIN)/lorehouse serve

bench: install-dev
	$(BIN)/python bench/parse.py
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/ask.py

sample-corpus: install
	$(BIN)/python scripts/make_sample_corpus.py

clean:
	rm -rf $(LOREHOUSE_DATA_DIR)
