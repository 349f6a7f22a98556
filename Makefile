# bookchat: `make run` serves on http://127.0.0.1:8000 (`make run BOOK=path/to/site` with your book as the
# default), `make test` runs the whole suite.
# The first Python 3.11 or newer on the PATH; `make run PYTHON=/path/to/python3.11` chooses one.
PYTHON ?= $(firstword $(foreach candidate,python3.13 python3.12 python3.11 python3,$(shell $(candidate) -c \
	'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && echo $(candidate))))
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
PYTEST_ARGS ?=
SHARED_DATA ?= ../shared/data

.PHONY: run test test-fast drills deploy-test llm-test lint codemap format docs bench image db-stop db-status \
	clean erase-data

# The virtualenv, made whole or made again: a .venv left by an interrupted run or by a Python older than 3.11 (which
# can't install bookchat) has no .created and is replaced.
$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "bookchat needs \
	Python 3.11 or newer, and '$(or $(PYTHON),python3)' is not: run make $(or $(MAKECMDGOALS),run) \
	PYTHON=/path/to/python3.11 (or newer)" >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	touch $@

$(VENV)/.installed: pyproject.toml | $(VENV)/.created
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# One install for the tests (the dev extras hold the app's own dependencies): it counts for `make run` too.
# pip byte-compiles the dependencies here (~10 s): a machine with PYTHONDONTWRITEBYTECODE set (CI's) would
# otherwise compile every import again in each of the suite's hundreds of processes.
$(VENV)/.installed-dev: pyproject.toml | $(VENV)/.created
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(VENV)/.installed $@

# The suite starts hundreds of Python processes (servers, workers, commands); where PYTHONDONTWRITEBYTECODE is
# set (as on CI's machine) none keeps what it compiles, so each would compile bookchat's modules anew: once here.
# Then the interface's translation catalogues (.po → .mo, generated, not in git; bookchat.base.catalogues), each
# only when its .po is newer: a fresh clone's pages and widget speak the reader's language from the first run.
APPS := bookchat chat ingestion audit bench tests
COMPILE = $(BIN)/python -m compileall -q $(APPS) && $(BIN)/python -m bookchat.base.catalogues

run: $(VENV)/.installed
	$(COMPILE)
	BOOKCHAT_DEBUG=$${BOOKCHAT_DEBUG:-true} PORT=$(PORT) $(BIN)/python manage.py serve $(if $(BOOK),--book "$(BOOK)")

test: $(VENV)/.installed-dev
	$(COMPILE)
	$(BIN)/python -m pytest -m "not drill and not fuzz and not deploy and not llm" $(PYTEST_ARGS)

test-fast: $(VENV)/.installed-dev
	$(COMPILE)
	$(BIN)/python -m pytest -m "not slow and not drill and not deploy and not llm" $(PYTEST_ARGS)

# The drills that bring up whole deployments of their own (several nodes, an external Postgres, Redis), build the
# wheel or crash the embedded server, the fuzz drills, axe-core over every page state and the checks of whole
# corpora: a suite of their own, so that `make test` stays under 10 minutes; .ci/run runs them after it.
drills: $(VENV)/.installed-dev
	$(COMPILE)
	$(BIN)/python -m pytest -m "drill or fuzz" $(PYTEST_ARGS)

# The deployments run for real (tests/test_deployed.py): the images built (deploy/image.sh --services: base images by
# debootstrap, cached in ~/.cache/bookchat/images), then the Kubernetes manifests played by podman and compose.yaml brought up,
# each asked, uploaded to, cut down and restarted. Needs root, podman, runc and debootstrap (.ci/run installs them).
deploy-test: $(VENV)/.installed-dev
	deploy/image.sh --services
	$(BIN)/python -m pytest -m deploy -s $(PYTEST_ARGS)

# The LLM path against a real model server: llama.cpp's (llama-cpp-python's OpenAI-compatible server) on Gemma 3 270M,
# started by tests/support/llama_server.py exactly as the manual's recipe says. pip compiles llama.cpp once (~4 minutes
# on 2 cores), without tuning for this CPU (a native build died with "Illegal instruction" on another machine), into
# LLM_WHEELS, which every clone on the machine reuses; pip's own cache is bypassed so that no native build slips in.
LLM_WHEELS ?= $(HOME)/.cache/bookchat/llm-wheels/avx2
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF
$(VENV)/.installed-llm: pyproject.toml $(VENV)/.installed-dev
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
		--find-links $(LLM_WHEELS) --wheel-dir $(LLM_WHEELS) 'llama-cpp-python>=0.3.36,<0.4'
	$(BIN)/python -m pip install --quiet --find-links $(LLM_WHEELS) -e '.[dev,llm]'
	touch $@

llm-test: $(VENV)/.installed-llm
	$(COMPILE)
	$(BIN)/python -m pytest -m llm $(PYTEST_ARGS)

# ruff; the import rules ([tool.importlinter]); pylint's duplicate-code check alone ([tool.pylint]); no function in
# any package but tests/ over 60 lines ([tool.bookchat.function-length]); tests/MODULES.md as the code makes it;
# the manual's "Privacy and data" page as the data inventory makes it.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/pylint bookchat chat ingestion audit bench
	$(BIN)/python -m tests.support.long_functions
	$(BIN)/python -m tests.support.codemap --check
	$(BIN)/python -m audit.privacy.manual --check

# tests/MODULES.md, which test covers which module, generated from the code and the tests (make lint checks it).
codemap: $(VENV)/.installed
	$(BIN)/python -m tests.support.codemap --write

# The manual's settings reference, generated from bookchat/base/conf.py (tests/test_settings.py checks it), and its
# "Privacy and data" page, from the data inventory in audit/privacy/ (make lint and tests/test_privacy.py check it).
docs: $(VENV)/.installed
	$(BIN)/python -c "from bookchat.base.conf import settings_reference; print(settings_reference(), end='')" > docs/operating/settings.md
	$(BIN)/python -m audit.privacy.manual --write

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Speed, scale and quality on the shared corpora: rewrites BENCHMARKS.md's measured section. QUICK=1: ~2 minutes (~4 on a fresh clone).
bench: $(VENV)/.installed
	$(BIN)/python manage.py bench --data $(SHARED_DATA) $(if $(QUICK),--quick,)

# The container image (deploy/Containerfile), built with podman from Debian's packages and PyPI alone (needs root,
# podman, runc and debootstrap: apt-get install -y podman runc debootstrap). TAG=bookchat:latest by default.
image: $(VENV)/.installed
	deploy/image.sh $(TAG)

db-stop: $(VENV)/.installed
	$(BIN)/python -m bookchat.cli db stop

db-status: $(VENV)/.installed
	$(BIN)/python -m bookchat.cli db status

# What a build makes, and nothing else: the virtualenv, caches, build output. The data (books, logins, keys, the
# audit trail and its archives, in var/) stays; `make erase-data` deletes it, after asking.
clean:
	-[ ! -x $(BIN)/python ] || $(BIN)/python -m bookchat.cli db stop
	rm -rf $(VENV) *.egg-info build dist .pytest_cache .ruff_cache
	$(if $(wildcard $(APPS)),find $(wildcard $(APPS)) -name __pycache__ -type d -prune -exec rm -rf {} +)

# Deletes the data folder (BOOKCHAT_DATA_DIR, var/ by default) after stopping the embedded database: it says what
# is there and asks for the folder's name (ARGS=--yes: no question).
erase-data: $(VENV)/.installed
	$(BIN)/python -m bookchat.cli data erase $(ARGS)
