# The captioning server for a GPU host. Build: `docker compose build` (see docs/deploy.md).
#
# Base: python:3.11-slim plus torch from PyPI. On Linux x86_64 the PyPI torch wheel is the CUDA build and
# brings its own CUDA runtime, cuBLAS and cuDNN as nvidia-* wheels, so no CUDA base image is needed: the host
# provides only the NVIDIA driver, injected by the NVIDIA Container Toolkit. To match an older driver, build
# with another of PyTorch's wheel indexes, e.g. `--build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126`
# (the CUDA version a driver supports is the one `nvidia-smi` prints).
#
# The service finds migrations/, models/ and frontend/ next to backend/ (backend/config.py: REPO_ROOT), so the
# project is installed in editable mode from /app instead of being copied into site-packages. The image holds the
# service only (backend/, biasing/, captions_model/); the tools eval/, loadtest/ and training/ stay out.
#
# Without a registry: `scripts/base_image.sh` builds a Debian bookworm base from Debian's packages and a local
# CPython 3.11 (Debian's 3.11.2 cannot unpack .nemo files with NeMo 3.0.0), used with
# `--build-arg PYTHON_IMAGE=captions-base:bookworm-py3.11.7`. A torch wheel placed in deploy/wheels/ (git-ignored)
# is installed instead of the one from the index, e.g. the CPU wheel for the CPU-only check
# (scripts/container_check.sh; docs/deploy.md, "Container check without a GPU").

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS deps
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=
# Debian packages for dependencies that ship no wheel here (a base on Debian's python3.11 adds python3.11-dev).
ARG BUILD_PACKAGES=build-essential
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# A compiler for any dependency that ships no wheel for this platform; it stays in this stage.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ${BUILD_PACKAGES} \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN pip install --upgrade pip "setuptools>=68" wheel
# torch first: a wheel from deploy/wheels/ if one is there, else from the chosen index; the dependency list below
# pins the same version (a local label such as +cpu satisfies it), so pip keeps it.
COPY deploy/wheels/ /tmp/wheels/
RUN if ls /tmp/wheels/torch-"${TORCH_VERSION}"*.whl >/dev/null 2>&1; then \
        pip install /tmp/wheels/torch-"${TORCH_VERSION}"*.whl; \
    elif [ -n "$TORCH_INDEX_URL" ]; then \
        pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"; \
    else \
        pip install "torch==${TORCH_VERSION}"; \
    fi
# Dependencies only (a layer that survives code changes): read from pyproject.toml, plus the PostgreSQL driver.
WORKDIR /src
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['postgres']))" > requirements.txt \
    && pip install -r requirements.txt

FROM ${PYTHON_IMAGE} AS runtime
# HF_HOME / NEMO_CACHE_DIR / TORCH_HOME: a pretrained model named by CAPTIONS_MODEL is downloaded once into
# /var/cache/captions, which docker-compose.yml mounts as the model-cache volume. NUMBA_CACHE_DIR: numba (via
# librosa) cannot cache next to the root-owned site-packages.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CAPTIONS_HOST=0.0.0.0 \
    CAPTIONS_PORT=8000 \
    CAPTIONS_CACHE_DIR=/app/var/cache \
    XDG_CACHE_HOME=/var/cache/captions \
    HF_HOME=/var/cache/captions/huggingface \
    NEMO_CACHE_DIR=/var/cache/captions/nemo \
    TORCH_HOME=/var/cache/captions/torch \
    NUMBA_CACHE_DIR=/var/cache/captions/numba \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN apt-get update \
    && apt-get install -y --no-install-recommends libsndfile1 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 captions \
    && useradd --system --uid 10001 --gid captions --home-dir /home/captions --create-home \
        --shell /usr/sbin/nologin captions
COPY --from=deps /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml README.md ./
COPY backend/ backend/
COPY captions_model/ captions_model/
COPY biasing/ biasing/
COPY migrations/ migrations/
COPY frontend/ frontend/
COPY models/ models/
COPY deploy/docker-entrypoint.py deploy/healthcheck.py /usr/local/lib/captions/
# The code stays root-owned and read-only to the service; only the data, cache and model-cache folders are its.
RUN pip install --no-deps --no-build-isolation --no-cache-dir -e . \
    && python -m compileall -q backend biasing captions_model migrations \
    && mkdir -p /app/data /app/var/cache /var/cache/captions \
    && chown -R captions:captions /app/data /app/var /var/cache/captions
# Numeric, so that orchestrators can verify it is not root without reading /etc/passwd.
USER 10001:10001
EXPOSE 8000
STOPSIGNAL SIGTERM
# /readyz is 200 only when the model is warm, the database answers, the server is not draining and has room.
# start-period covers the first download of a pretrained model; docker-compose.yml sets its own, longer one.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10m --retries=3 \
    CMD ["python", "/usr/local/lib/captions/healthcheck.py"]
ENTRYPOINT ["python", "/usr/local/lib/captions/docker-entrypoint.py"]
CMD ["captions", "serve"]
