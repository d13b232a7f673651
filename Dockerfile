# GPU image: the official PyTorch image with CUDA, then cape_pipeline on top.
#   docker build -t cape_pipeline .
#   docker run --gpus all -v $PWD/data:/data cape_pipeline run /data/x.h5ad --device cuda --out /data/out
# The base's torch (2.11.0, CUDA 12.8: NVIDIA driver >= 570) satisfies pyproject's torch>=2.1, so
# pip keeps it rather than pulling another torch.
FROM pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    NUMBA_CACHE_DIR=/tmp/numba

WORKDIR /opt/cape_pipeline
COPY pyproject.toml README.md LICENSE ./
COPY cape_pipeline ./cape_pipeline
# Fails the build if pip replaced the CUDA build of torch, or if the CLI cannot start.
RUN pip install --no-cache-dir . \
    && python -c "import torch; assert torch.version.cuda, 'torch lost its CUDA build'" \
    && cape datasets > /dev/null

# Run as an unprivileged user, uid:gid 1000:1000 (the usual first user of a Linux host, so files
# written to a bind-mounted /data belong to them; otherwise pass --user "$(id -u):$(id -g)").
# Some Ubuntu bases already have a user 1000 ("ubuntu"): it makes way for cape.
RUN if id -u 1000 >/dev/null 2>&1; then userdel --remove "$(id -nu 1000)"; fi \
    && useradd --create-home --uid 1000 --user-group cape \
    && mkdir -p /data /work \
    && chown 1000:1000 /data /work
USER 1000:1000
VOLUME ["/data", "/work"]
WORKDIR /work

ENTRYPOINT ["cape"]
CMD ["--help"]
