"""RegDiffusion in its own virtual environment (run by counts.py): X.npy (log-normalized, cells ×
genes) → adjacency .npy, ``[i, j]`` = weight of gene i → gene j. Defaults of regdiffusion 0.2.3
(1,000 steps), CPU, two threads, seeded."""

import sys

import numpy as np
import regdiffusion as rd
import torch

torch.set_num_threads(2)
x = np.load(sys.argv[1])
trainer = rd.RegDiffusionTrainer(x, device="cpu", seed=int(sys.argv[3]))
trainer.train()
np.save(sys.argv[2], trainer.get_adj().astype(np.float32))
