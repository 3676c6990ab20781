# The two commands of the README. Everything is installed into local virtualenvs:
#   .venv         TF 2.15.1 + tensorflow-estimator 2.15.0 (runs Estimator programs), e2k, test tools
#   .venv-newest  the newest tensorflow-cpu (Keras 3): the migrated programs must run there too;
#                 and JAX (CPU), which programs converted with --target jax run on
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
NEWEST := .venv-newest

.PHONY: demo test docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $@

$(NEWEST)/.installed:
	$(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/pip install --quiet --upgrade pip
	$(NEWEST)/bin/pip install --quiet tensorflow-cpu "jax[cpu]"
	touch $@

# Show what e2k does to TensorFlow's own multi-GPU Estimator example, then prove it trains the same.
demo: $(VENV)/.installed
	$(VENV)/bin/e2k rewrite --diff fixtures/seed_mirrored_linear/before.py || true
	$(VENV)/bin/e2k parity fixtures/seed_mirrored_linear/before.py fixtures/seed_mirrored_linear/after.py

# The whole suite, parity tests included (CI's budget: 25 minutes on 2 cores). --durations: the
# slowest tests, in CI's log, to see what the budget goes to. --no-loadscope-reorder: the files
# go to the two workers in the order tests/conftest.py gives, the slow ones first, so that the
# quick files, not one slow file, end each worker's time.
test: $(VENV)/.installed $(NEWEST)/.installed
	E2K_TARGET_PYTHON=$(abspath $(NEWEST))/bin/python $(VENV)/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=30

docs: $(VENV)/.installed
	$(VENV)/bin/python -m estimator2keras.docs docs/rules

clean:
	rm -rf $(VENV) $(NEWEST)
