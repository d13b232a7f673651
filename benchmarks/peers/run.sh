#!/bin/bash
# Every PE and attention option side by side on pbmc68k_reduced annotation,
# scGPT-style backbone (D 32, 2 layers, 4 heads), the tasks' default budget, 3 seeds.
# Two processes side by side, one torch thread each (ratios under the same load).
cd "$(dirname "$0")/../.." || exit 1
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=1
$PY benchmarks/tasks/run.py --tasks annotation --seeds 0 1 2 --out benchmarks/peers/results_pe \
  --arms none cape learned-small-norm rank-value > benchmarks/peers/results_pe.log 2>&1 &
$PY benchmarks/tasks/run.py --tasks annotation --seeds 0 1 2 --out benchmarks/peers/results_attention \
  --arms cape@cone-umbral cape@cone-penumbral > benchmarks/peers/results_attention.log 2>&1 &
wait
