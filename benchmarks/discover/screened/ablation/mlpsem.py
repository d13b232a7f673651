import torch, math
from torch import nn
from cape_pipeline.causal.screened import h_spectral_sparse

class ScreenedMLPSEM(nn.Module):
    def __init__(self, parents, hidden=16, generator=None):
        super().__init__()
        parents, _ = torch.sort(parents.long(), dim=1)
        m, k = parents.shape
        dup = torch.zeros_like(parents, dtype=torch.bool); dup[:, 1:] = parents[:, 1:] == parents[:, :-1]
        self.register_buffer("parents", parents)
        self.register_buffer("mask", (~dup).float())
        s = 1.0 / math.sqrt(k)
        self.w1 = nn.Parameter(torch.randn(m, k, hidden, generator=generator) * s * 0.1)
        self.b1 = nn.Parameter(torch.randn(m, hidden, generator=generator) * 0.1)
        self.w2 = nn.Parameter(torch.randn(m, hidden, generator=generator) / math.sqrt(hidden))
        self.b2 = nn.Parameter(torch.zeros(m))
        self.lin = nn.Parameter(torch.zeros(m, k))
        self.n_features = m
    def group(self):
        return (self.w1.pow(2).sum(2) + self.lin.pow(2) + 1e-12).sqrt() * self.mask
    def forward(self, x):
        m, k = self.parents.shape
        xt = x.T.contiguous()
        xp = torch.index_select(xt, 0, self.parents.reshape(-1)).view(m, k, -1)  # (M, k, B)
        w = torch.cat([self.w1, self.lin[:, :, None]], dim=2) * self.mask[:, :, None]  # (M, k, H+1)
        z = torch.bmm(w.transpose(1, 2), xp)  # (M, H+1, B)
        hdim = self.w1.shape[2]
        act = torch.cat([torch.sigmoid(z[:, :hdim] + self.b1[:, :, None]), z[:, hdim:]], dim=1)
        w2 = torch.cat([self.w2, torch.ones_like(self.b2)[:, None]], dim=1)[:, None, :]  # (M,1,H+1)
        out = (torch.bmm(w2, act).squeeze(1) + self.b2[:, None]).T
        class T: pass
        t = T(); t.recon = 0.5 * (x - out).pow(2).sum(1).mean(); t.kl = torch.zeros(()); t.neg_elbo = t.recon
        return t
    def l1(self):
        return self.group().sum()
    def acyclicity(self, state, n_iter):
        return h_spectral_sparse(self.group(), self.parents, n_iter=n_iter, state=state)
    def edges(self):
        m, k = self.parents.shape
        child = torch.arange(m).repeat_interleave(k)
        return self.parents.reshape(-1), child, self.group().detach().reshape(-1)
