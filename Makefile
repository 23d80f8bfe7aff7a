# Two entry points for a fresh machine (see README):
#   make site   set up .venv and build the book into _build/html
#   make test   set up .venv and run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# The CPU build this repository is tested with; override with e.g. TORCH=torch on a laptop.
TORCH  ?= torch==2.13.0

# Debian packages `make setup` installs when they are missing (as root with apt-get, as in
# CI; elsewhere it only names them). One a line: PACKAGE, or COMMAND:PACKAGE to accept
# COMMAND on PATH from anywhere (see tools/system-packages.sh).
SYSTEM_PACKAGES = \
	bwrap:bubblewrap \
	npm:npm \
	chromium:chromium \
	fonts-dejavu-core
# bubblewrap: the grader runs student code in a bwrap sandbox.
# npm: fetches MathJax, RequireJS and the widget manager once (tools/web_assets.py).
# chromium, fonts-dejavu-core: tests/test_browser.py renders the built site headless.

# MathJax, RequireJS and the ipywidgets manager, served by the site itself (no CDN):
# installed into the venv, copied into _build/html/_static by book/_ext/offline_assets.py.
WEB_ASSETS = $(VENV)/share/course-web-assets/.installed

.PHONY: site test release setup system-packages clean

site: setup
	$(BIN)/jupyter-book build . --warningiserror --keep-going

test: setup
	$(BIN)/python -m pytest

release: setup
	$(BIN)/python -m autograder release

setup: system-packages $(VENV)/.installed $(WEB_ASSETS)

system-packages:
	@sh tools/system-packages.sh $(SYSTEM_PACKAGES)

$(VENV)/.installed: requirements.txt pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	# `python -m autograder` from any directory, and the check helpers for local Jupyter.
	$(BIN)/python -m pip install --quiet --no-deps --editable .
	touch $@

$(WEB_ASSETS): tools/web_assets.py $(VENV)/.installed | system-packages
	$(BIN)/python tools/web_assets.py
	touch $@

clean:
	rm -rf _build
