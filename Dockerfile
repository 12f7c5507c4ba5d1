# The image of `phalanx operator` and `phalanx scheduler` on a cluster (`phalanx install --image`).
# Build: `make image`. Runs as a non-root user on a read-only root filesystem (writable: /tmp).

# Build stage: a wheel of Phalanx and its pinned dependencies, installed into a virtualenv.
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/phalanx \
 && /opt/phalanx/bin/pip install --no-compile . \
 && /opt/phalanx/bin/python -m compileall -q /opt/phalanx/lib

# Runtime stage: the virtualenv only, owned by root, run by an unprivileged user.
FROM python:3.11.14-slim-bookworm
LABEL org.opencontainers.image.title="phalanx" \
      org.opencontainers.image.description="Gang-scheduled training jobs: Kubeflow v1 operator and Volcano-style scheduler" \
      org.opencontainers.image.source="https://github.com/phalanx-dev/phalanx"
COPY --from=build /opt/phalanx /opt/phalanx
# Nothing is written outside /tmp (an emptyDir in the generated Deployments): no bytecode, state under /tmp.
ENV PATH=/opt/phalanx/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    PHALANX_HOME=/tmp/phalanx
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["phalanx"]
CMD ["--help"]
