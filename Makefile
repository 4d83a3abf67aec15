# The two set-up commands: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 5000
HOST ?= 127.0.0.1
export PORT HOST

.PHONY: run test bench lint install clean

$(STAMP): setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/odysseus serve

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

lint: $(STAMP)
	$(BIN)/python -m pyflakes odysseus tests bench wsgi.py gunicorn.conf.py

clean:
	rm -rf $(VENV) build *.egg-info
