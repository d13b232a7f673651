"""SDCD with intervention masks on one screen; runs inside SDCD's venv (``../sdcd/.venv``).

    python _sdcd.py IN.npz OUT.npz

IN holds ``x`` (N, M) float32 and ``labels`` (N,): ``"obs"`` for control cells, else the
comma-joined column indices of the perturbed genes (SDCD's ``perturbation_label`` format).
Every SDCD default: ``SDCD().train(create_intervention_dataset(X_df))``.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("WANDB_MODE", "disabled")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

from sdcd.models import SDCD  # noqa: E402
from sdcd.utils import create_intervention_dataset  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
data = np.load(src)
x, labels = data["x"], data["labels"]
d = x.shape[1]
X_df = pd.DataFrame(x, columns=[str(i) for i in range(d)])
X_df["perturbation_label"] = labels
dataset = create_intervention_dataset(X_df)
t0 = time.perf_counter()
model = SDCD()
model.train(dataset)
seconds = time.perf_counter() - t0
pred = np.asarray(model.get_adjacency_matrix(threshold=True)).astype(np.int8)
cont = np.asarray(model.get_adjacency_matrix(threshold=False), dtype=np.float32)
np.savez(dst, pred=pred, cont=cont, seconds=seconds)
