"""GRNBoost2 (arboreto) in its own virtual environment (run by counts.py): X.npy (log-normalized,
cells × genes) → adjacency .npy of importances, ``[i, j]`` = regulator i → target j; every gene
is a candidate regulator (no TF list, as for the other methods); two dask worker processes."""

import sys

import numpy as np
import pandas as pd
from arboreto.algo import grnboost2
from distributed import Client, LocalCluster

if __name__ == "__main__":
    x = np.load(sys.argv[1])
    m = x.shape[1]
    names = [f"g{i}" for i in range(m)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        net = grnboost2(pd.DataFrame(x, columns=names), client_or_address=client, seed=int(sys.argv[3]))
    idx = {n: i for i, n in enumerate(names)}
    adj = np.zeros((m, m), dtype=np.float32)
    adj[net["TF"].map(idx).to_numpy(), net["target"].map(idx).to_numpy()] = net["importance"].to_numpy()
    np.save(sys.argv[2], adj)
