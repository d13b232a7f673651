#!/usr/bin/env bash
# Installs the published SDCD (Nazaret et al., PyPI `sdcd==0.1.4`) into its OWN venv,
# benchmarks/discover/sdcd/.venv, kept out of cape_pipeline. CPU machine, Python 3.11.
#
# What worked (recorded when this script was run):
#  1. torch==2.13.0 FIRST: on this machine pip resolves it to the CPU wheel
#     torch-2.13.0+cpu (served from the local wheel directory /opt/wheels via PIP_FIND_LINKS);
#     a bare `torch` requirement would pull several GB of CUDA wheels.
#  2. sdcd==0.1.4 with its own pins (networkx<4, numba 0.59.x, pandas<2, scipy<2, tqdm,
#     wandb 0.15.x, torch>=2.1,<3): resolves on Python 3.11 with torch 2.13.0 already in place,
#     so no --no-deps was needed. BUT wandb 0.15.12 (imported by sdcd) does `import pkg_resources`,
#     which the setuptools in a fresh venv (84.x after the pip upgrade) no longer ships ->
#     ModuleNotFoundError at `import sdcd`. Fix: setuptools<81 (gives pkg_resources back).
#  Resolved set on 2026-11-24: torch 2.13.0+cpu, sdcd 0.1.4, numpy 1.26.4, pandas 1.5.3,
#     numba 0.59.1, scipy 1.17.1, networkx 3.6.1, wandb 0.15.12, setuptools<81.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
"$PY" -m venv "$HERE/.venv"
VPY="$HERE/.venv/bin/python"
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip install -q torch==2.13.0
"$VPY" -m pip install -q sdcd==0.1.4
"$VPY" -m pip install -q "setuptools<81"   # wandb 0.15 needs pkg_resources
"$VPY" -c "import torch, sdcd, importlib.metadata as m; print('torch', torch.__version__, 'sdcd', m.version('sdcd'))"
"$VPY" -m pip freeze > "$HERE/.venv/freeze.txt"
"$VPY" -m pip freeze | grep -i -E '^(torch|sdcd|numpy|pandas|numba|scipy|networkx|wandb)=='
