import sys, time, math, numpy as np, torch, networkx as nx
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from data import gen
from cape_pipeline.causal.screened import screen_parents, ScreenedSEMVAE
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.postprocess import break_cycles
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
torch.set_num_threads(1)

def train(model, xt, epochs, bs, lr, lam, seed, al=False, tau=0.2, outer=10, rho_factor=10, log=""):
    n, m = xt.shape
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0)
    g = torch.Generator().manual_seed(seed)
    rho, alpha, h_last, state = 1.0, 0.0, math.inf, {}
    per = max(1, epochs // (outer if al else 1))
    for o in range(outer if al else 1):
        for ep in range(per):
            perm = torch.randperm(n, generator=g)
            for b in range(0, n, bs):
                idx = perm[b:b+bs]
                if idx.numel() < 2: continue
                t = model(xt[idx])
                pen = lam * model.l1()
                if al:
                    h = model.acyclicity(state, 5); pen = pen + 0.5 * rho * h * h + alpha * h
                loss = t.neg_elbo + pen / bs
                opt.zero_grad(); loss.backward(); opt.step()
        if al:
            with torch.no_grad(): hn = float(model.acyclicity(state, 50))
            a = to_adj(model, tau)
            nc, _ = connected_components(a, directed=True, connection="strong")
            if nc == m: break
            alpha += rho * hn
            if hn > 0.25 * h_last: rho *= rho_factor
            h_last = hn
    return model

def to_adj(model, tau):
    p, c, w = model.edges(); m = model.n_features
    a = sp.coo_array((w.numpy().astype(float), (p.numpy(), c.numpy())), shape=(m, m)).tocsr()
    a.sum_duplicates(); a.data[np.abs(a.data) <= tau] = 0; a.eliminate_zeros()
    return a

def greedy_dag(base_edges, cand, m):
    """base: list of (p,c) acyclic; cand: list of (p,c,|w|) added by decreasing weight if acyclic."""
    g = nx.DiGraph(); g.add_nodes_from(range(m)); g.add_edges_from(base_edges)
    for p, c, w in sorted(cand, key=lambda e: -e[2]):
        if g.has_edge(p, c): continue
        if not nx.has_path(g, c, p):
            g.add_edge(p, c)
    return list(g.edges())

def run(x, B, model_kind='lin', hidden=16, k=20, lam=1.0, e1=60, e2=60, e3=60, bs=256, lr=3e-3, tau=0.2, seed=0, mode="al", rf=10, outer=10):
    xt = torch.from_numpy(x).float(); n, m = xt.shape
    t0 = time.perf_counter(); out = {}
    P = screen_parents(xt, k)  # both rounds (package version)
    gen = torch.Generator().manual_seed(seed)
    from mlpsem import ScreenedMLPSEM
    mk = (lambda: ScreenedSEMVAE(P, generator=torch.Generator().manual_seed(seed))) if model_kind == 'lin' else (lambda: ScreenedMLPSEM(P, hidden=hidden, generator=torch.Generator().manual_seed(seed)))
    model = mk()
    train(model, xt, e1, bs, lr, lam, seed)
    Pn = P.numpy(); cand = np.zeros((m, m), bool); cand[Pn.reshape(-1), np.repeat(np.arange(m), Pn.shape[1])] = True
    out["screen_recall"] = (cand & (B != 0)).sum() / B.sum()
    a0 = to_adj(model, 0.0)
    out["s1_best"] = max((dag_metrics(((abs(a0) > t_)).toarray().astype(float), B)["f1"], t_) for t_ in [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4])
    a1 = to_adj(model, tau); out["s1"] = dag_metrics(a1.toarray(), B)["f1"]; out["s1_nnz"] = a1.nnz
    w1 = {(int(i), int(j)): abs(v) for i, j, v in zip(*a1.nonzero(), a1.data)}
    if mode == "al":
        # restrict to S1 support
        sup = torch.zeros(m, m, dtype=torch.bool); ii = torch.tensor(list(w1.keys()))
        sup[ii[:, 0], ii[:, 1]] = True
        p_, c_, _ = model.edges()
        model.mask.mul_(sup[p_, c_].view_as(model.mask).float())
        train(model, xt, e2, bs, lr, lam, seed + 7, al=True, tau=tau, outer=outer, rho_factor=rf)
        a2 = to_adj(model, tau); a2, _ = break_cycles(a2)
        out["s2"] = dag_metrics(a2.toarray(), B)["f1"]
        base = list(zip(*[v.tolist() for v in a2.nonzero()]))
    else:
        base = []
    edges = greedy_dag(base, [(p, c, w) for (p, c), w in w1.items()], m)
    out["greedy"] = dag_metrics(sp.coo_array((np.ones(len(edges)), tuple(np.array(edges).T)), shape=(m, m)).toarray(), B)["f1"]
    # refit on final support
    sup = torch.zeros(m, m, dtype=torch.bool); ee = torch.tensor(edges); sup[ee[:, 0], ee[:, 1]] = True
    model2 = mk()
    p_, c_, _ = model2.edges()
    model2.mask.mul_(sup[p_, c_].view_as(model2.mask).float())
    train(model2, xt, e3, bs, lr, lam, seed + 3)
    a3 = to_adj(model2, tau); a3, nd = break_cycles(a3)
    p_, c_, w_ = model.edges()
    S = np.zeros((m, m)); np.add.at(S, (p_.numpy(), c_.numpy()), np.abs(w_.numpy()))
    met = dag_metrics(a3.toarray(), B)
    out.update(final=met["f1"], sk=met["skeleton_f1"], shd=met["shd"], nnz=met["nnz"], secs=time.perf_counter() - t0)
    return out

if __name__ == "__main__":
    m = int(sys.argv[1]); graph = sys.argv[2]; sem = sys.argv[3]
    kw = eval("dict(" + (sys.argv[4] if len(sys.argv) > 4 else "") + ")")
    n = kw.pop("n", 2000)
    x, B = gen(m, graph, sem, n=n, edges_per_node=kw.pop("epn", 2))
    print(graph, sem, m, n, kw, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in run(x, B, **kw).items()}, flush=True)
