"""GRNBoost2 or GENIE3 (arboreto) in its own virtual environment (run by counts.py and
../real/real.py): ``X.npy`` (log-normalized, cells × genes) → adjacency ``.npy`` of importances,
``[i, j]`` = regulator i → target j; two dask worker processes.

Usage: ``python _arboreto.py X.npy OUT.npy SEED [ALGORITHM [TFS.npy]]``; ALGORITHM is ``grnboost2``
(default) or ``genie3``; TFS.npy holds the column indices of the candidate regulators (arboreto's
``tf_names``); without it every gene is a candidate regulator."""

import sys

import numpy as np
import pandas as pd
from arboreto.algo import genie3, grnboost2
from distributed import Client, LocalCluster

if __name__ == "__main__":
    x = np.load(sys.argv[1])
    algorithm = {"grnboost2": grnboost2, "genie3": genie3}[sys.argv[4] if len(sys.argv) > 4 else "grnboost2"]
    m = x.shape[1]
    names = [f"g{i}" for i in range(m)]
    tfs = [names[i] for i in np.load(sys.argv[5])] if len(sys.argv) > 5 else "all"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        net = algorithm(pd.DataFrame(x, columns=names), tf_names=tfs, client_or_address=client, seed=int(sys.argv[3]))
    idx = {n: i for i, n in enumerate(names)}
    adj = np.zeros((m, m), dtype=np.float32)
    adj[net["TF"].map(idx).to_numpy(), net["target"].map(idx).to_numpy()] = net["importance"].to_numpy()
    np.save(sys.argv[2], adj)
