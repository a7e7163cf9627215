# Two entry points for a fresh machine (Python, pip and gcc only): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= examples/torch/conv_bn_relu.py

.PHONY: install demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,llm,jax]'
	touch $@

# Test-only extras: Ray (the --ray backend test) and playwright driving Debian's chromium (the
# report.html browser test); chromium comes from apt (CI runs as root on Debian).
# The tutorial pass (docs/writing-a-pass.md) as a user installs it: a package of its own whose
# `solar_compiler.passes` entry point registers it; lit_tests/node-intensity runs it.
$(VENV)/.installed-test: $(VENV)/.installed examples/passes/pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev,llm,ray,browser,zoo,vision]'
	$(BIN)/python -m pip install -q --no-deps -e examples/passes
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/solar-opt $(DEMO) --translate --lift-einsum --roofline=all --hw H100_SXM

# pytest on TEST_WORKERS processes (pytest-xdist), a test file to a worker (`--dist loadfile`): a
# module's fixtures (translations, suite runs, servers, the browser) are built once, and tests that
# need a process to themselves (memory limits, sandboxes, Ray, chdir/env) keep their file's order;
# the session's translation cache is shared by the workers (tests/translated.py). Not `loadgroup`:
# xdist 3.8 groups tests by renaming node ids, which pytest 9 no longer reads (the groups are ignored).
# lit runs its tests on every core by default, beside pytest: its solar-opt processes fill the time
# pytest's workers leave idle (about 5% of it, waiting on subprocesses and timeouts); its output is
# printed after pytest's, and either failing fails the target (8m07s -> 7m34s on 2 idle cores).
TEST_WORKERS ?= 2
test: install $(VENV)/.installed-test
	$(BIN)/ruff check .
	@lit_log=$$(mktemp); \
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/lit -s lit_tests > $$lit_log 2>&1 & lit_pid=$$!; \
	PATH="$(abspath $(BIN)):$$PATH" SOLAR_TEST_REQUIRE_OPTIONAL=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile; \
	pytest_rc=$$?; wait $$lit_pid; lit_rc=$$?; echo "lit lit_tests:"; cat $$lit_log; rm -f $$lit_log; \
	test $$pytest_rc -eq 0 && test $$lit_rc -eq 0

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
