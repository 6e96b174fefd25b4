# Two entry points: `make html` builds the site (with the wheel and sdist of triton_guide in
# _build/html/dist/), `make test` runs the unit tests, builds the site, installs the package
# from the served site into a fresh environment and runs every download there (tests/site),
# and checks the site in a headless Chromium (tests/browser; skipped, saying how to enable
# them, when Playwright or Chromium is missing); `make bench`, on a GPU, refreshes the
# recorded timings in triton_guide/_results/. Both entry points set up their own environment first:
#   - by default, a virtual environment in .venv with the versions in constraints.txt
#     (re-created when pyproject.toml or constraints.txt change);
#   - with USE_SYSTEM_PYTHON=1, the python3 already on the machine (with its torch and
#     triton) and nothing is installed: for GPU machines without network access.

PYTHON ?= python3
VENV ?= .venv
SPHINXOPTS ?=
PYTEST_ARGS ?=
PYTEST_WORKERS ?=
BROWSER_WORKERS_ARG = $(if $(PYTEST_WORKERS),-n $(PYTEST_WORKERS),$$($(PY) -c 'import importlib.util as u; print("-n auto" if u.find_spec("xdist") else "")'))
WORKERS_ARG = $(if $(PYTEST_WORKERS),-n $(PYTEST_WORKERS),$$($(PY) -c 'import importlib.util as u, shutil; print("" if shutil.which("nvidia-smi") or not u.find_spec("xdist") else "-n auto")'))
BUILDDIR ?= _build

ifeq ($(USE_SYSTEM_PYTHON),1)
PY := $(PYTHON)
ENV_READY :=
else
PY := $(VENV)/bin/python
ENV_READY := $(VENV)/.installed
endif
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: html test pytest site-test bench browser-test clean distclean

html: $(ENV_READY)
	$(PY) -m sphinx -W --keep-going -b html -c . $(SPHINXOPTS) docs $(BUILDDIR)/html
	@echo "The site is in $(BUILDDIR)/html/index.html"

test: pytest html site-test browser-test

# Unit tests in parallel, one worker per CPU core (pytest-xdist), on machines without a GPU:
# the interpreter runs each test on one core. On a GPU machine one process, so that tests
# which time kernels do not share the GPU; PYTEST_WORKERS=N sets the count anywhere.
pytest: $(ENV_READY)
	$(PY) -m pytest --ignore=tests/browser --ignore=tests/site $(WORKERS_ARG) $(PYTEST_ARGS)

# The built site as a learner meets it; needs `make html` first (`make test` does both).
site-test: $(ENV_READY)
	$(PY) -m pytest tests/site -p no:cacheprovider $(SITE_TEST_ARGS)

# The built site in a real browser; needs `make html` first (`make test` does both).
# Pages are visited in parallel too (each worker drives its own Chromium), GPU or not.
browser-test: $(ENV_READY)
	$(PY) -m pytest tests/browser -p no:cacheprovider $(BROWSER_WORKERS_ARG) $(BROWSER_TEST_ARGS)

# On a GPU: run every example page (or PAGE=softmax) with recording on, refreshing
# triton_guide/_results/<gpu>/<page>.json; no site is built. See triton_guide/_results/README.md.
bench: $(ENV_READY)
	$(PY) benchmarks/record.py $(if $(PAGE),--page $(PAGE))

$(VENV)/.installed: pyproject.toml constraints.txt
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --progress-bar off -c constraints.txt -e ".[test,docs]"
	touch $@

clean:
	rm -rf $(BUILDDIR) docs/auto_examples docs/gen_modules docs/sg_execution_times.rst build

distclean: clean
	rm -rf $(VENV)
