"""SERGIO (Dibaeinia & Sinha 2020; the authors' PyPI release ``sergio-scsim``) in its own virtual
environment (run by counts.py): a steady-state simulation of a gene regulatory network sampled
from the package's E. coli reference network, then SERGIO's technical noise, written as .npz
(``counts`` cells × genes int32, ``genes``, ``edges`` regulator → target, ``cell_type``).

Every setting is the package's default or the one of the authors' steady-state notebook
(``run_sergio.ipynb``: noise amplitude q = 1, decay 0.8, Hill n = 2, activation k ∈ [1, 5] for
75 % of the edges and repression k ∈ [−5, −1], master-regulator levels low [1, 2.5] / high
[3.5, 5] per cell type; outliers p = 0.01, lognormal(0.8, 1); library lognormal(4.6, 0.4);
dropout shape 6.5 at the 82nd percentile; Poisson counts), with one change: the notebook's
library is for 100 genes, so its log mean is raised by ln(M / 100) to keep the counts per gene.

Usage: ``python _sergio.py N_GENES N_CELLS N_TYPES SEED OUT.npz``. SERGIO draws from NumPy's
global generator, seeded here, and iterates over sets of gene names, whose order follows Python's
string hashing: the script runs itself again with ``PYTHONHASHSEED`` = SEED unless it is already
set so, since otherwise one seed gives other counts in every process.
"""

import os
import sys

import numpy as np
import SERGIO
from SERGIO import sergio
from SERGIO.GRN._create import grn_from_Ecoli
from SERGIO.MR._profile import mrProfile
from SERGIO.Noise._noise import scNoise

if __name__ == "__main__":
    n_genes, n_cells, n_types, seed = (int(v) for v in sys.argv[1:5])
    if os.environ.get("PYTHONHASHSEED") != str(seed):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": str(seed)})
    out = os.path.abspath(sys.argv[5])
    np.random.seed(seed)
    os.chdir(os.path.dirname(os.path.dirname(SERGIO.__file__)))  # the reference file is read by a relative path
    grn = grn_from_Ecoli(nGenes=n_genes)
    profile = mrProfile(MR_names=grn.get_mrs(), n_types=n_types)
    profile.build_rnd()
    grn.init(profile, update_half_resp=True)
    sim = sergio(grn)
    per_type = [n_cells // n_types + (t < n_cells % n_types) for t in range(n_types)]
    sim.simulate(nCells=per_type, noise_s=1, safety_iter=150, scale_iter=10)
    expr = sim.getSimExpr()  # genes × cells
    genes = np.asarray(expr.index.astype(str), dtype=str)
    counts = scNoise()._add_noise(expr.to_numpy(dtype=np.float64), prob_o=0.01, mean_o=0.8, scale_o=1,
                                  mean_l=4.6 + np.log(len(genes) / 100), scale_l=0.4, shape_d=6.5, perc_d=82,
                                  to_count=True)
    edges = np.array([[i.reg_[0].name_, i.tar_.name_] for i in grn.attr_["interactions"].values()], dtype=str)
    tmp = out + ".tmp.npz"
    np.savez_compressed(tmp, counts=counts.T.astype(np.int32), genes=genes, edges=edges,
                        cell_type=np.repeat(np.arange(n_types), per_type))
    os.replace(tmp, out)
