# The course's virtual environment, for the repository's Makefile and the student distribution's
# (`python -m autograder publish` copies this file). The Makefile that includes it sets PYTHON,
# VENV, TORCH (and TORCH_INDEX: the index PyTorch is fetched from, none for pip's own) and
# SYSTEM_PACKAGES first, and makes its own targets depend on `setup` (everything, the web assets
# included) or `python-env` (the Python packages only: no npm).
BIN = $(VENV)/bin
UV_PIP = $(BIN)/uv pip install --quiet --python $(BIN)/python
# MathJax, RequireJS and the ipywidgets manager, served by the site itself (no CDN): installed
# into the venv, copied into _build/html/_static by book/_ext/offline_assets.py; needs npm once.
WEB_ASSETS = $(VENV)/share/course-web-assets/.installed

# Where PyTorch's CPU build is asked for (TORCH_INDEX is one of pytorch.org's CPU indexes, the
# student distribution's default), the build installed is checked: pip also reads this machine's
# pip configuration (find-links, extra indexes), which may offer a CUDA or ROCm build instead.
TORCH_CPU_ASKED = $(findstring /cpu,$(TORCH_INDEX))
define TORCH_CPU_CHECK
import sys, torch
built_for = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"ROCm {torch.version.hip}" if torch.version.hip else ""
if built_for:
    version = torch.__version__.split("+")[0]
    sys.exit(f"make: PyTorch's CPU build was asked for (TORCH_INDEX=$(TORCH_INDEX)), but pip installed torch "
             f"{torch.__version__}, built for {built_for}: this machine's pip configuration (pip config list, "
             "PIP_* variables: find-links, extra indexes) offered it. Name the CPU build (TORCH=torch=="
             f"{version}+cpu), or leave that configuration out (PIP_CONFIG_FILE=/dev/null make ...); for this "
             "GPU build, say TORCH_INDEX= .")
print(f"PyTorch {torch.__version__}: the CPU build, as asked")
endef
export TORCH_CPU_CHECK
CHECK_TORCH = $(if $(TORCH_CPU_ASKED),$(BIN)/python -c "$$TORCH_CPU_CHECK",@echo "no particular build of PyTorch asked for")

.PHONY: setup python-env system-packages check-torch

setup: system-packages $(VENV)/.installed $(WEB_ASSETS)
python-env: $(VENV)/.installed

# One a line in SYSTEM_PACKAGES: PACKAGE, or COMMAND:PACKAGE to accept COMMAND on PATH from
# anywhere; installed as root with apt-get (as in CI), elsewhere only named (tools/system-packages.sh).
system-packages:
	@sh tools/system-packages.sh $(SYSTEM_PACKAGES)

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	# PyTorch found by pip, which reads this machine's pip configuration (where it may keep a build
	# to use), installed by uv, which unpacks and compiles in parallel; then the rest by uv (12 s
	# against pip's 31 s on 2 cores), keeping that PyTorch. Compiled, as pip would: the graders run
	# without writing bytecode.
	rm -rf $(VENV)/torch-wheel
	$(BIN)/python -m pip download --quiet --no-deps --dest $(VENV)/torch-wheel \
		$(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	$(UV_PIP) --compile-bytecode $(VENV)/torch-wheel/*.whl
	rm -rf $(VENV)/torch-wheel
	$(CHECK_TORCH)
	$(UV_PIP) --compile-bytecode -r requirements.txt
	# `python -m autograder` (in the repository) and the check helpers, for Jupyter started anywhere
	$(UV_PIP) --no-deps --editable .
	touch $@

# The installed PyTorch: the CPU build, where that was asked for (the install checks it too)
check-torch:
	$(CHECK_TORCH)

$(WEB_ASSETS): tools/web_assets.py $(VENV)/.installed | system-packages
	$(BIN)/python tools/web_assets.py
	touch $@
