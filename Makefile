# Two entry points for a fresh machine (see README.md; the rest is in docs/):
#   make site   set up .venv, train the book's models if their code changed, build the book into _build/html
#   make test   set up .venv and run the test suite
#   make docs   build the project's documentation (docs/) into docs/_build/html
PYTHON ?= python3
VENV   ?= .venv
# The CPU build this repository is tested with; override with e.g. TORCH=torch on a laptop.
TORCH  ?= torch==2.13.0
# Test processes for `make test` (pytest-xdist): most tests wait on kernels, sockets and
# subprocesses, so two keep a 2-core machine busier than one.
TEST_PROCESSES ?= 2

# Debian packages `make setup` installs when they are missing (see tools/venv.mk).
SYSTEM_PACKAGES = \
	bwrap:bubblewrap \
	npm:npm \
	chromium:chromium \
	fonts-dejavu-core \
	postgresql
# bubblewrap: the grader runs student code in a bwrap sandbox.
# npm: fetches MathJax, RequireJS and the widget manager once (tools/web_assets.py).
# chromium, fonts-dejavu-core: tests/test_browser.py renders the built site headless.
# postgresql: the submission service's tests also run on a PostgreSQL server they start (initdb).

.DEFAULT_GOAL := site
include tools/venv.mk

.PHONY: site test docs release clean

# The chapters' models and results (book/data/) first: trained only when their code or data
# changed (python -m coursebuild.models); then the book, which only loads them. A page whose
# notebook fails fails the build, and is executed again by the next one (book/_ext/execution_guard.py).
site: setup
	$(BIN)/python -m coursebuild.models
	$(BIN)/jupyter-book build . --warningiserror --keep-going

# axe-core, the accessibility checker the browser tests run on every page (classroom/axe.py):
# from the npm registry, pinned, into a folder the site never serves.
TEST_ASSETS = $(VENV)/share/course-test-assets/.installed

test: setup $(TEST_ASSETS)
	$(BIN)/python -m pytest -n $(TEST_PROCESSES)

$(TEST_ASSETS): tools/web_assets.py $(VENV)/.installed | system-packages
	$(BIN)/python tools/web_assets.py --tests
	touch $@

# The documentation: every warning an error, a broken link between its pages included
# (tests/test_docs.py builds it too, so CI does).
docs: python-env
	$(BIN)/jupyter-book build docs --warningiserror --keep-going

release: setup
	$(BIN)/python -m autograder release

clean:
	rm -rf _build docs/_build
