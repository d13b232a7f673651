import sys, time, numpy as np, torch
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from data import gen
from cape_pipeline.causal.screened import screen_parents
torch.set_num_threads(1)
def residuals(xt, P, lam=1e-2, chunk=100):
    n, m = xt.shape
    R = torch.empty_like(xt)
    for s in range(0, m, chunk):
        idx = P[s:s+chunk]                       # (b, k)
        Xp = xt[:, idx].permute(1, 0, 2)          # (b, N, k)
        y = xt[:, s:s+chunk].T.unsqueeze(2)       # (b, N, 1)
        G = Xp.transpose(1, 2) @ Xp / n + lam * torch.eye(idx.shape[1])
        beta = torch.linalg.solve(G, Xp.transpose(1, 2) @ y / n)
        R[:, s:s+chunk] = (y - Xp @ beta).squeeze(2).T
    return R
def topk_resid(xt, R, k):
    n, m = xt.shape
    out = []
    for s in range(0, m, 500):
        c = (R[:, s:s+500].T @ xt).abs() / n / R[:, s:s+500].std(0)[:, None]
        ii = torch.arange(c.shape[0]); c[ii, ii + s] = -1
        out.append(torch.topk(c, k, dim=1).indices)
    return torch.cat(out)
def recall(P, B):
    m = P.shape[0]
    cand = np.zeros((m, m), bool)
    cand[P.reshape(-1), np.repeat(np.arange(m), P.shape[1])] = True
    return (cand & (B != 0)).sum() / B.sum(), cand.sum()/m
if __name__ == "__main__":
 for graph in ["sf", "er"]:
  for sem in ["mlp", "linear"]:
    x, B = gen(1000, graph, sem)
    xt = torch.from_numpy(x).float()
    t=time.perf_counter()
    P = screen_parents(xt, 20)  # package: columns [0, 40) round 1, [40, 60) round 2
    P1 = P[:, :40]
    t=time.perf_counter()-t
    print(graph, sem, "r1", recall(P1.numpy(), B), "r1+2", recall(P.numpy(), B), f"{t:.1f}s", flush=True)
