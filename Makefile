# One command to run the service on a fresh machine, one to test it.
VENV ?= .venv
PYTHON ?= python3
PORT ?= 5000
BIN := $(VENV)/bin

.PHONY: run test lint format venv dev-venv

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(BIN)/activate
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/activate
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

venv: $(VENV)/.runtime
dev-venv: $(VENV)/.dev

## make run: virtualenv, install, migrate, demo workspace, then serve on 127.0.0.1:$(PORT)
run: venv
	$(BIN)/flask --app wsgi db upgrade
	PORT=$(PORT) $(BIN)/flask --app wsgi demo
	$(BIN)/gunicorn --bind 127.0.0.1:$(PORT) wsgi:app

## make test: the whole suite, on SQLite and on PostgreSQL
test: dev-venv
	$(BIN)/pytest -q

lint: dev-venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: dev-venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
