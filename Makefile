VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: install install-test system-deps demo lint test bench image clean envtest envtest-force

# Runtime only: what `make demo` and `phalanx run` of a command-line job need.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# The test extra: test tools plus the examples' libraries (torch, mpi4py, xgboost, jax, paddlepaddle, the
# Kubeflow SDK) and selenium for the web view's browser tests.
$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# System packages the test suite needs (Debian/Ubuntu): OpenMPI (mpirun, and the headers mpi4py
# builds against) for the MPIJob tests; libnss-wrapper so pods resolve each other's names;
# Chromium and its WebDriver for the web view's browser tests.
SYSTEM_PACKAGES := openmpi-bin libopenmpi-dev libnss-wrapper chromium chromium-driver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	  | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo "installing $$missing"; \
	  $(SUDO) apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing >/dev/null; fi

# The Kubernetes control plane tests/envtest runs (kube-apiserver, etcd, kube-controller-manager,
# kube-scheduler, kubectl), built from Go modules (tools/envtest) into a cache folder; Go's build
# cache makes a rebuild fast. controller-runtime's envtest convention: tests read KUBEBUILDER_ASSETS;
# a user who points it at binaries of their own gets nothing built.
ENVTEST_K8S_VERSION := v1.36.3
ENVTEST_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/phalanx/envtest/$(ENVTEST_K8S_VERSION)/bin
ENVTEST_INPUTS := $(wildcard tools/envtest/go.mod tools/envtest/go.sum tools/envtest/etcd/go.mod tools/envtest/etcd/go.sum tools/envtest/etcd/*.go)
# The stamp's name carries a hash of the inputs (a fresh clone's new file times rebuild nothing);
# a missing binary forces the build.
ENVTEST_STAMP := $(ENVTEST_DIR)/.built-$(shell cat $(ENVTEST_INPUTS) | sha256sum | cut -c1-16)
ENVTEST_BINS := $(addprefix $(ENVTEST_DIR)/,etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
ENVTEST_FORCE := $(if $(filter-out $(wildcard $(ENVTEST_BINS)),$(ENVTEST_BINS)),envtest-force)
ENVTEST_VERSION_PKG := k8s.io/component-base/version
ENVTEST_LDFLAGS := -s -w -X $(ENVTEST_VERSION_PKG).gitVersion=$(ENVTEST_K8S_VERSION) \
  -X $(ENVTEST_VERSION_PKG).gitMajor=$(word 1,$(subst ., ,$(ENVTEST_K8S_VERSION:v%=%))) \
  -X $(ENVTEST_VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(ENVTEST_K8S_VERSION:v%=%))) \
  -X $(ENVTEST_VERSION_PKG).gitTreeState=clean
ENVTEST_GO_BUILD := go build -trimpath -buildvcs=false -mod=readonly

$(ENVTEST_STAMP): $(ENVTEST_FORCE)
	@mkdir -p $(ENVTEST_DIR) && rm -f $(ENVTEST_DIR)/.built-*
	cd tools/envtest && $(ENVTEST_GO_BUILD) -ldflags='$(ENVTEST_LDFLAGS)' -o $(ENVTEST_DIR)/ \
	  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	cd tools/envtest/etcd && $(ENVTEST_GO_BUILD) -ldflags='-s -w' -o $(ENVTEST_DIR)/etcd .
	@touch $@

# Built unless KUBEBUILDER_ASSETS names another folder (it may name this one).
ifeq ($(filter-out $(ENVTEST_DIR),$(KUBEBUILDER_ASSETS)),)
envtest: $(ENVTEST_STAMP)
	@echo "envtest binaries in $(ENVTEST_DIR)"
else
envtest:
	@echo "envtest: KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS), nothing built"
endif
envtest-force:

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
# -n 2: both cores (pytest-xdist); tests/conftest.py keeps a file's tests, and tests/envtest's, on one worker.
test: system-deps install-test lint envtest
	KUBEBUILDER_ASSETS=$(or $(KUBEBUILDER_ASSETS),$(ENVTEST_DIR)) $(PY) -m pytest -q --no-skips --durations=25 \
	  -n 2 --dist loadfile

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
