VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: install demo test bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/phalanx run examples/pytorchjob.yaml

test: install
	$(VENV)/bin/python -m pytest -q

bench: install
	$(PY) benchmarks/scheduler_throughput.py
	$(PY) benchmarks/submit_latency.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
