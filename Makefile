# evlab — `make run` opens the dashboard, `make test` runs the tests; both go through `make setup`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD  := fixture/build
BEHAVIOURS := baseline false-success hash-storm unexpected-egress redundant-upload \
              busy-wait corrupt-upload retry
CLIENTS := $(addprefix $(BUILD)/client-,$(BEHAVIOURS))
CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra -Werror -fno-omit-frame-pointer
# pytest-xdist workers: three more than the CPUs, so a worker waiting on a lab (a timeout, a
# Ray node, a dashboard's pause, nginx under load) leaves its CPU to another. On this 2-core
# machine (2026-12-06): three workers 251 s of pytest, the CPUs busy 86% of it; four 229 s,
# busy 95%. With the longest files handed out first (tests/conftest.py), four 207 s with 32
# CPU-s idle, five 201 s with 9-15; later five 181 s with ~12 idle, six 185 s (more CPU spent).
# The tests hold beside such load (a CPU hog beside make test passes).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 3 )))

# Python's bytecode cache on, whatever the caller's environment says: with
# PYTHONDONTWRITEBYTECODE set (as on this machine's shells) every process of a session (evlab,
# its spawner, a Ray worker, each pytest worker's assertion rewriting) compiles evlab from its
# source again; make test cost ~30 CPU-s more of its ~460 (docs/performance.md).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: all setup system venv warm clients test-programs run test test-fast bench lint clean
all: clients

setup: system venv clients warm

system:
	@bash scripts/setup-system.sh

venv: $(VENV)/.stamp
$(VENV)/.stamp: pyproject.toml scripts/setup-venv.sh
	@bash scripts/setup-venv.sh $(VENV) $(PYTHON)
	@touch $@

# Compiled once per machine, at set-up: evlab's own bytecode (every process of a test run or a
# campaign's nodes would compile it until the first wrote it) and, as root, the BPF collector
# (probes/bcc/warm.py). A fresh clone's first make test took ~12 s longer than its second.
warm: venv
	@$(PY) -m compileall -q fixture probes sessions tui evlab bench tests >/dev/null
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m probes.bcc.warm; fi

clients: $(CLIENTS)
$(BUILD)/client-%: fixture/backup/client.c | $(BUILD)
	@$(CC) $(CFLAGS) -DEVLAB_BEHAVIOUR='"$*"' -o $@ $< -lcrypto
$(BUILD):
	@mkdir -p $@

# The tests' own C programs, built once here rather than by each pytest worker (tests/conftest.py
# asks for them through this target: a no-op when they are up to date)
TESTBUILD := tests/build
test-programs: $(TESTBUILD)/exerciser $(TESTBUILD)/operator $(TESTBUILD)/egress
$(TESTBUILD)/exerciser: tests/programs/exerciser.c | $(TESTBUILD)
	@$(CC) -O2 -g -pthread -o $@ $<
$(TESTBUILD)/operator: tests/programs/operator.c | $(TESTBUILD)
	@$(CC) -O2 -Wall -Werror -o $@ $<
$(TESTBUILD)/egress: tests/clients/egress.c | $(TESTBUILD)
	@$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -o $@ $< -lcrypto
$(TESTBUILD):
	@mkdir -p $@
# pytest's assertion-rewritten test modules and hypothesis' scan of the sources' constants,
# written once when a test changed instead of by each pytest worker as it starts: on a fresh
# clone each worker spent ~3 s of CPU on them (~15 CPU-s a run, five workers at once). A
# collection error is the run's to report, in full.
$(TESTBUILD)/.collected: $(wildcard tests/*.py) pyproject.toml | $(TESTBUILD)
	@$(PY) -m pytest --collect-only -q -p no:cacheprovider >/dev/null || true
	@touch $@

run: setup
	@$(VENV)/bin/evlab

test: setup test-programs $(TESTBUILD)/.collected
	@$(VENV)/bin/lint-imports --no-cache >/dev/null || $(VENV)/bin/lint-imports --no-cache
	@$(VENV)/bin/ruff check -q .
	@$(VENV)/bin/mypy
	@$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=12

# The edit loop, as any user, in under a minute: ruff, then the tests not marked root, slow or live.
test-fast: | $(VENV)/.stamp
	@$(VENV)/bin/ruff check .
	@$(PY) -m pytest -q -m "not root and not slow and not live"

bench: setup
	@$(PY) -m bench

lint: setup
	@$(VENV)/bin/ruff check .

clean:
	rm -rf $(BUILD) $(TESTBUILD) $(VENV) .pytest_cache
