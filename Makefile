# One command to run the service on a fresh machine, one to test it.
VENV ?= .venv
PYTHON ?= python3
PORT ?= 5000
BIN := $(VENV)/bin

# Byte-compiled modules are kept (in __pycache__, which git ignores) even where the environment
# says PYTHONDONTWRITEBYTECODE, as some CI images do: without them each test process rewrites
# every test module's asserts again (11 s of a process's 23 s collection) and each server a test
# starts compiles the app again. An empty value is Python's "not set".
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test check fast-tests lint format venv dev-venv screenshots

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# caldav's HTTP client (niquests) needs urllib3-future, whose wheel installs a .pth file that
# copies it over urllib3 at every start (breaking requests); built from source with
# URLLIB3_NO_OVERRIDE it lives beside urllib3 as urllib3_future.
PIP_INSTALL = URLLIB3_NO_OVERRIDE=1 $(BIN)/pip install -q --no-binary urllib3-future

$(VENV)/.runtime: requirements.txt | $(BIN)/activate
	$(PIP_INSTALL) -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/activate
	$(PIP_INSTALL) -r requirements-dev.txt
	touch $@ $(VENV)/.runtime

venv: $(VENV)/.runtime
dev-venv: $(VENV)/.dev

## make run: virtualenv, install, migrate, demo workspace, then the Procfile's web (on
## 127.0.0.1:$(PORT)), worker and beat under honcho: one command, and one Ctrl-C stops all three
## cleanly with make exiting 0. Through run_procfile.py rather than `honcho start` (its docstring
## has the details): honcho's stop, SIGTERM to each process's whole group, kills the Celery
## worker's pool processes under it (ERROR lines, tasks cut short) and SIGKILLs the worker 5 s on;
## run_procfile.py sends one SIGTERM to each program alone, which stops its own children, and
## waits up to 25 s. PUBLIC_URL defaults to web's address for all three (honcho gives each
## program its own PORT, so a link the worker writes would otherwise name the worker's). And
## make, itself interrupted by Ctrl-C, kills itself with SIGINT (status 130) whatever the recipe returns, so run_procfile.py takes the terminal's foreground (as a
## shell does for a job) and Ctrl-C reaches it alone. `exec`: make's child is run_procfile.py.
run: venv
	$(BIN)/flask --app wsgi db upgrade
	PORT=$(PORT) $(BIN)/flask --app wsgi demo
	HOST=127.0.0.1 PUBLIC_URL="$${PUBLIC_URL:-http://127.0.0.1:$(PORT)}" PATH="$(abspath $(BIN)):$$PATH" \
	  exec $(BIN)/python run_procfile.py --port $(PORT) web worker beat

## make test: the whole suite on PostgreSQL (the server DATABASE_URL names, else an embedded one
## the session starts itself: tests/conftest.py); then the tests about dates (DST, notice,
## horizon, working hours, reminders: marked about_dates, tests/conftest.py) again on shifted
## clocks: a summer day, New York's spring-forward day, and its fall-back day (01:30 EST). The
## costly ones (marked one_shifted_clock) run on the last clock alone. A test whose dates only
## pick a slot to book runs on the real clock alone. The conventions (tests/conventions) are
## make lint's.
TEST_CLOCKS ?= 2027-07-15T14:00:00Z 2027-03-14T06:30:00Z 2027-11-07T06:30:00Z
## pytest-xdist, a test file to a process at a time. `make test`'s main pass runs three
## processes: about half its tests wait out real time on servers and subprocesses, so two left
## a core idle for a third of the run (11.1 minutes with two, 9.0 with three, 2026-12-06). The
## tests about dates and the fast tests are CPU-bound (a clock's pass 35 s with two or three),
## and `make check` runs make lint beside the fast tests: two processes there.
PYTEST = $(BIN)/pytest -q --dist loadfile --ignore=tests/conventions
test: dev-venv
	$(PYTEST) -n 3 --durations=25
	@last=$(lastword $(TEST_CLOCKS)); for clock in $(TEST_CLOCKS); do \
	  marks="about_dates and not one_shifted_clock"; \
	  if [ "$$clock" = "$$last" ]; then marks=about_dates; fi; \
	  echo "tests about dates on a clock starting at $$clock"; \
	  $(PYTEST) -n 2 -m "$$marks" --clock $$clock || exit 1; \
	done

## make check: the contributors' inner loop: make lint beside the fast tests (none that starts
## server processes or waits out real time: not marked slow), each target's output shown whole
## when it ends, then the seconds each folder's tests took (--time-per-folder,
## tests/conftest.py). The two run side by side because the tests leave part of the cores idle
## while they wait on PostgreSQL, and type checking a fresh clone takes half a minute. `make
## test` is still what CI runs.
FAST_TESTS = tests/unit tests/api tests/services tests/dashboard tests/worker
check: dev-venv
	@$(MAKE) --no-print-directory -j2 --output-sync=target lint fast-tests

fast-tests: dev-venv
	$(PYTEST) -n 2 -m "not slow" --time-per-folder $(FAST_TESTS)

## make lint: ruff, formatting, the import contracts, types, and the conventions the code and
## the tests keep (tests/conventions: date markers, public APIs only, no sleeps, the docs'
## links, the settings' table, what importing costs, who commits).
lint: dev-venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest -q -n 0 tests/conventions

format: dev-venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## make screenshots: the browser tests that look at the dashboard, then the README's and the
## docs' pictures copied from what they wrote (test-artifacts/screenshots/, NAME-laptop.png and
## NAME-phone.png for every page they look at).
SCREENSHOTS = calendar-week-laptop:calendar.png calendar-phone-day-phone:calendar-phone.png \
	reschedule-laptop:reschedule.png event-types-phone:event-types-phone.png \
	connections-phone-phone:connections-phone.png
screenshots: dev-venv
	$(BIN)/pytest -q tests/dashboard/test_dashboard_layout.py tests/dashboard/test_dashboard_browser.py \
	  -k "week_views_booking or phone_gets_a_day_grid or stacked_table or invited_user_is_kept_out"
	@for pair in $(SCREENSHOTS); do \
	  cp test-artifacts/screenshots/$${pair%%:*}.png docs/screenshots/$${pair#*:}; \
	  echo "docs/screenshots/$${pair#*:} from $${pair%%:*}.png"; done
