VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: install install-test system-deps demo lint test bench image clean

# Runtime only: what `make demo` and `phalanx run` of a command-line job need.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# The test extra: test tools plus the examples' libraries (torch, mpi4py, xgboost, jax, the Kubeflow SDK).
$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# System packages the test suite needs (Debian/Ubuntu): OpenMPI (mpirun, and the headers mpi4py
# builds against) for the MPIJob tests; libnss-wrapper so pods resolve each other's names.
SYSTEM_PACKAGES := openmpi-bin libopenmpi-dev libnss-wrapper
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing $$missing"; \
	  $(SUDO) apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing >/dev/null; fi

demo: install
	$(VENV)/bin/phalanx run examples/pytorchjob.yaml

# The build checks the layering (import-linter contracts in pyproject.toml), unused and private-name use (ruff)
# and types (mypy; strict on the object layer, the controller runtime and the pure cores).
lint: install-test
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) tools/lint_layout.py
	$(VENV)/bin/hadolint Dockerfile

# --no-skips: a test skipped because something is missing fails (a skip would hide a missing install).
test: system-deps install-test lint
	$(PY) -m pytest -q --no-skips

bench: install-test
	$(PY) benchmarks/scheduler_throughput.py
	$(PY) benchmarks/submit_latency.py

# The operator/scheduler image (Dockerfile), tagged as `phalanx install` names it by default.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/phalanx-dev/phalanx:$(VERSION)
image:
	@engine=$$(for e in docker podman; do command -v $$e >/dev/null && $$e info >/dev/null 2>&1 \
	  && echo $$e && break; done); \
	if [ -z "$$engine" ]; then echo "make image: no container engine answers here (docker or podman):" \
	  "build with one, e.g. docker build -t $(IMAGE) ." >&2; exit 1; fi; \
	$$engine build -t $(IMAGE) . && echo "built $(IMAGE): phalanx install --image $(IMAGE) | kubectl apply -f -"

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
