VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: install system-deps demo test bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

# OpenMPI for the MPIJob end-to-end test (mpirun + the headers mpi4py needs); Debian packages.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@command -v mpirun >/dev/null 2>&1 || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null; }

demo: install
	$(VENV)/bin/phalanx run examples/pytorchjob.yaml

test: system-deps install
	$(VENV)/bin/python -m pytest -q

bench: install
	$(PY) benchmarks/scheduler_throughput.py
	$(PY) benchmarks/submit_latency.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
