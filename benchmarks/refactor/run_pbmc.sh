#!/bin/bash
# usage: run_pbmc.sh TAG [PYTHONPATH]  (env: WORK = output folder, PY = python of the venv)
TAG=$1; export PYTHONPATH=$2; export OMP_NUM_THREADS=1
mkdir -p "${WORK:-/tmp/eq}" && cd "${WORK:-/tmp/eq}" && rm -rf w_$TAG out_$TAG
"${PY:-python}" -c "import sys; from cape_pipeline.cli import main; sys.exit(main(sys.argv[1:]))" run pbmc68k_reduced \
  --workdir w_$TAG --out out_$TAG --seed 0 --threads 1 \
  --set preprocess.n_top_features=200 --set discover.epochs=30 --set embed.max_epochs=100 \
  --set train.n_seeds=1 --set train.pretrain_epochs=1 --set train.finetune_epochs=3 --set evaluate.umap=false > log_$TAG.txt 2>&1
echo "rc=$?" >> log_$TAG.txt
