# GPU image: PyTorch with CUDA from the official image, then cape_pipeline on top.
#   docker build -t cape_pipeline .
#   docker run --gpus all -v $PWD/data:/data cape_pipeline cape run /data/my.h5ad --device cuda --out /data/out
FROM pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime

WORKDIR /opt/cape_pipeline
COPY pyproject.toml README.md ./
COPY cape_pipeline ./cape_pipeline
# torch is already in the image (satisfies the torch>=2.1 requirement), so pip keeps it.
RUN pip install --no-cache-dir . && cape datasets >/dev/null

WORKDIR /work
ENTRYPOINT []
CMD ["cape", "--help"]
