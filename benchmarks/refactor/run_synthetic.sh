#!/bin/bash
# usage: run_synthetic.sh TAG [PYTHONPATH]  (env: WORK = output folder, PY = python of the venv)
TAG=$1; export PYTHONPATH=$2; export OMP_NUM_THREADS=1
mkdir -p "${WORK:-/tmp/eq}" && cd "${WORK:-/tmp/eq}" && rm -rf w2_$TAG out2_$TAG
"${PY:-python}" -c "import sys; from cape_pipeline.cli import main; sys.exit(main(sys.argv[1:]))" run synthetic-mlp --until encode \
  --workdir w2_$TAG --out out2_$TAG --seed 0 --threads 1 --set ingest.n_nodes=20 --set discover.epochs=200 --set embed.max_epochs=200 > log2_$TAG.txt 2>&1
echo "rc=$?" >> log2_$TAG.txt
