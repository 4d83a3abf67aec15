# The two set-up commands: `make run` and `make test`. Both create .venv on first use.
# `make test` runs every test serially (CI); `make test-fast` leaves out the ones marked `slow`
# (browser, live servers, fuzzing: tests/slowmarks.py) and runs the rest on four processes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 5000
HOST ?= 127.0.0.1
export PORT HOST

VENDOR := static/vendor
VENDOR_STAMP := $(VENDOR)/.installed
NPM ?= npm

.PHONY: run test test-fast bench bench-peers lint install vendor llama-server clean

$(STAMP): setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# Third-party browser libraries: pinned in package.json/package-lock.json, installed from the
# npm registry and copied into the git-ignored static/vendor/ (no third-party code is committed).
$(VENDOR_STAMP): package.json package-lock.json
	$(NPM) ci --no-audit --no-fund --loglevel=error
	mkdir -p $(VENDOR)
	cp node_modules/marked/lib/marked.umd.js $(VENDOR)/marked.umd.js
	cp node_modules/dompurify/dist/purify.min.js $(VENDOR)/purify.min.js
	cp node_modules/@highlightjs/cdn-assets/highlight.min.js $(VENDOR)/highlight.min.js
	cp node_modules/mermaid/dist/mermaid.min.js $(VENDOR)/mermaid.min.js
	cp node_modules/codejar/dist/codejar.js $(VENDOR)/codejar.js
	# codejar.d.ts beside it types the page's import of it for the JS check (`make lint`)
	cp node_modules/codejar/dist/codejar.d.ts $(VENDOR)/codejar.d.ts
	cp node_modules/diff/dist/diff.min.js $(VENDOR)/diff.min.js
	mkdir -p $(VENDOR)/katex
	cp node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css $(VENDOR)/katex/
	cp -r node_modules/katex/dist/fonts $(VENDOR)/katex/
	touch $@

vendor: $(VENDOR_STAMP)

run: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/odysseus serve

# A real llama.cpp llama-server for tests/test_llama_server.py and bench 13: built once from the pinned
# llama-cpp-python sdist with cmake (about 10 minutes on 2 cores) into ~/.cache/odysseus-test/
# (LLAMA_SERVER_CACHE moves it); a no-op once built (tests/llamacpp.py).
llama-server: $(STAMP)
	$(BIN)/python tests/llamacpp.py build

test: $(STAMP) $(VENDOR_STAMP) llama-server
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/python -m pytest -m "not slow" -n 4 $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

# Opt-in: installs LiteLLM proxy (and Open WebUI) into .bench-peers/ and compares them (bench/peers.py).
bench-peers: $(STAMP)
	$(BIN)/python -m bench.peers

# The lint gate (.ci/run runs it before the tests): ruff's rules (ruff.toml), mypy over the packages
# listed in setup.cfg [mypy], tsc's JSDoc check of static/js (tsconfig.json; typescript comes with
# `make vendor`'s npm ci), and last the formatter's check, so the others report even before a reformat.
lint: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	node_modules/.bin/tsc --project tsconfig.json
	node scripts/tsc_strict.mjs
	$(BIN)/ruff format --check --output-format concise .

clean:
	rm -rf $(VENV) build *.egg-info node_modules $(VENDOR)
