import numpy as np, random, logging
def gen(m, graph="sf", sem="mlp", n=2000, seed=0, edges_per_node=2):
    from castle.datasets import DAG, IIDSimulation
    np.random.seed(seed); random.seed(seed)
    logging.getLogger().setLevel(logging.WARNING)
    ne = edges_per_node*m
    if graph == "sf":
        w = DAG.scale_free(n_nodes=m, n_edges=ne, weight_range=(0.5, 2.0), seed=seed)
    else:
        w = DAG.erdos_renyi(n_nodes=m, n_edges=ne, weight_range=(0.5, 2.0), seed=seed)
    if sem == "mlp":
        sim = IIDSimulation(W=w, n=n, method="nonlinear", sem_type="mlp")
    else:
        sim = IIDSimulation(W=w, n=n, method="linear", sem_type="gauss")
    x = np.asarray(sim.X, dtype=np.float64)
    x = (x - x.mean(0)) / x.std(0)
    return x, (np.asarray(sim.B) != 0).astype(int)
