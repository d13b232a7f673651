import sys, time, math, numpy as np, torch
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from data import gen
from cape_pipeline.causal.screened import screen_parents, ScreenedSEMVAE
from cape_pipeline.causal.metrics import dag_metrics
from cape_pipeline.causal.postprocess import break_cycles
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
torch.set_num_threads(1)

def to_adj(model, tau):
    p, c, w = model.edges()
    m = model.n_features
    a = sp.coo_array((w.numpy().astype(float), (p.numpy(), c.numpy())), shape=(m, m)).tocsr()
    a.sum_duplicates()
    a.data[np.abs(a.data) <= tau] = 0; a.eliminate_zeros()
    return a

def fit(x, B, k=20, lam=1.0, epochs=300, bs=256, lr=3e-3, tau=0.2, two_round=True, seed=0, outer=10, verbose=True, rho_factor=10.0, acyc=True, rho0=1.0, wd=0.0):
    xt = torch.from_numpy(x).float(); n, m = xt.shape
    t0 = time.perf_counter()
    P = screen_parents(xt, k)  # both rounds (package version); two_round is ignored
    tscreen = time.perf_counter()-t0
    g = torch.Generator().manual_seed(seed)
    model = ScreenedSEMVAE(P, generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    rho, alpha, h_last = rho0, 0.0, math.inf
    state = {}
    per = max(1, epochs // outer)
    gperm = torch.Generator().manual_seed(seed + 1)
    for o in range(outer):
        for ep in range(per):
            perm = torch.randperm(n, generator=gperm)
            for b in range(0, n, bs):
                idx = perm[b:b+bs]
                if idx.numel() < 2: continue
                t = model(xt[idx])
                h = model.acyclicity(state, 5)
                loss = t.neg_elbo + (lam * model.l1() + (0.5 * rho * h * h + alpha * h) * acyc) / bs
                opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            hn = float(model.acyclicity(state, 50))
        a = to_adj(model, tau)
        nc, _ = connected_components(a, directed=True, connection="strong")
        isdag = nc == m
        if verbose and (o % max(1, outer // 10) == 0 or o == outer - 1):
            met = dag_metrics(a.toarray(), B)
            print(f"  outer {o} h {hn:.3g} rho {rho:.0e} dag {isdag} nnz {a.nnz} f1 {met['f1']:.3f} sk {met['skeleton_f1']:.3f} kl {float(t.kl):.1f} rec {float(t.recon):.1f} {time.perf_counter()-t0:.0f}s", flush=True)
        if not isdag:
            alpha += rho * hn
            if hn > 0.25 * h_last: rho *= rho_factor
            h_last = hn
    a = to_adj(model, tau)
    a, nd = break_cycles(a)
    p, c, w = model.edges()
    S = np.zeros((m, m)); np.add.at(S, (p.numpy(), c.numpy()), np.abs(w.numpy()))
    met = dag_metrics(a.toarray(), B, scores=S)
    return met, time.perf_counter()-t0, tscreen

if __name__ == "__main__":
    m = int(sys.argv[1]); graph = sys.argv[2]; sem = sys.argv[3]
    kw = eval("dict(" + (sys.argv[4] if len(sys.argv) > 4 else "") + ")")
    x, B = gen(m, graph, sem)
    met, t, ts = fit(x, B, **kw)
    print(graph, sem, m, kw, {k: round(v, 3) for k, v in met.items()}, f"{t:.0f}s screen {ts:.1f}s")
    # correlation best threshold
    C = np.abs(np.corrcoef(x.T)); np.fill_diagonal(C, 0)
    best = max((dag_metrics((C > t_).astype(float), B)["f1"], t_) for t_ in np.linspace(0.05, 0.9, 35))
    print("corr best f1", best)
