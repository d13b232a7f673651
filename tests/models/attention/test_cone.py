"""Cone attention (paper 003): heights against a direct implementation of Defs. 1–2, symmetry,
continuity at the penumbral branch boundary (Eq. 33), stated limits, gradients, backbone use."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cape_pipeline.models import build_backbone
from cape_pipeline.models.attention import ATTENTIONS, build_attention
from cape_pipeline.models.attention.cone import (
    PenumbralConeAttention,
    UmbralConeAttention,
    penumbral_height,
    psi_map,
    umbral_height,
    xi_map,
)

NAMES = ["cone-penumbral", "cone-umbral"]


def slow_penumbral(u, v, r=1.0):
    """Eqs. 21–23 literally, one pair at a time (float64 numpy)."""
    ud, vd = u[-1], v[-1]
    a = float(np.linalg.norm(u[:-1] - v[:-1]))
    su, sv = math.sqrt(r * r - ud * ud), math.sqrt(r * r - vd * vd)
    if (a - su) ** 2 + vd * vd < r * r or a <= su:  # Eq. 23
        return max(ud, vd, math.sqrt(r * r - ((su + sv - a) / 2) ** 2))  # Eq. 21
    return math.sqrt(((a * a + ud * ud - vd * vd) / (2 * a)) ** 2 + vd * vd)  # Eq. 22


def slow_umbral(u, v, r=0.1):
    a = float(np.linalg.norm(u[:-1] - v[:-1]))
    return max(u[-1], v[-1], a / (2 * math.sinh(r)) + (u[-1] + v[-1]) / 2)  # Eq. 8


def _points(kind, n, d, seed, scale=1.0):
    x = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale
    return xi_map(x) if kind == "pen" else psi_map(x)


@pytest.mark.parametrize("kind", ["pen", "umb"])
def test_heights_match_direct_formulas(kind):
    u, v = _points(kind, 7, 5, 0), _points(kind, 9, 5, 1, scale=0.3)
    fast = (penumbral_height if kind == "pen" else umbral_height)(u, v)
    slow = slow_penumbral if kind == "pen" else slow_umbral
    ref = torch.tensor([[slow(a.numpy(), b.numpy()) for b in v] for a in u], dtype=torch.float64)
    if kind == "pen":  # both branches must be exercised
        assert (ref <= 1.0).any() and (ref > 1.0).any()
    torch.testing.assert_close(fast, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", ["pen", "umb"])
def test_heights_symmetric(kind):
    u, v = _points(kind, 6, 4, 2), _points(kind, 8, 4, 3, scale=0.5)
    f = penumbral_height if kind == "pen" else umbral_height
    torch.testing.assert_close(f(u, v), f(v, u).T, rtol=1e-10, atol=1e-10)


def _boundary_pair(a, r=1.0, ud=0.6, vd=0.3):
    """u, v in the (x, height) plane at horizontal distance a (d = 2)."""
    u = torch.tensor([[0.0, ud]], dtype=torch.float64)
    v = torch.tensor([[a, vd]], dtype=torch.float64)
    return u, v


def test_penumbral_continuous_across_branch_boundary():
    r, ud, vd = 1.0, 0.6, 0.3
    a0 = math.sqrt(r * r - ud * ud) + math.sqrt(r * r - vd * vd)  # Eq. 33 boundary
    vals = []
    for a in (a0 - 1e-7, a0, a0 + 1e-7):
        vals.append(float(penumbral_height(*_boundary_pair(a, r, ud, vd))))
    assert slow_penumbral(np.array([0.0, ud]), np.array([a0 - 1e-7, vd])) <= r  # in-cone side
    assert slow_penumbral(np.array([0.0, ud]), np.array([a0 + 1e-7, vd])) > r  # out-of-cone side
    # Eq. 33: both branches equal r on the boundary
    assert vals == pytest.approx([r, r, r], abs=1e-5)


@pytest.mark.parametrize("where", ["boundary", "equal", "tiny", "huge"])
@pytest.mark.parametrize("name", NAMES)
def test_gradients_finite(name, where):
    attn = build_attention(name, 8, 2).double()
    torch.manual_seed(0)
    if where == "boundary":  # raw q, k placed exactly on the penumbral boundary (per head)
        u, v = _boundary_pair(math.sqrt(1 - 0.36) + math.sqrt(1 - 0.09))
        q = torch.cat([u, v]).requires_grad_()
        h = penumbral_height(q[:1], q[1:]) if name == "cone-penumbral" else umbral_height(q[:1], q[1:])
        h.sum().backward()
        assert torch.isfinite(q.grad).all()
        return
    scale = {"equal": 1.0, "tiny": 1e-9, "huge": 1e4}[where]
    x = torch.randn(2, 5, 8, dtype=torch.float64) * scale
    if where == "equal":
        x = x[:, :1].expand(2, 5, 8).clone()  # every q_i = k_j after projection
    x.requires_grad_()
    out = attn(x, torch.zeros(5, 4, dtype=torch.float64))
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_float32_extremes_finite(name):
    attn = build_attention(name, 8, 2)
    for scale in (0.0, 1e-6, 1e3):
        x = (torch.randn(2, 6, 8) * scale).requires_grad_()
        attn(x, torch.randn(6, 4)).sum().backward()
        assert torch.isfinite(x.grad).all()


def test_paper_limits():
    # sup₂(u, u) = u and, for v directly below u (a = 0), sup₂ = the higher point.
    u = _points("pen", 5, 4, 4)
    torch.testing.assert_close(penumbral_height(u, u).diagonal(), u[:, -1])
    w = _points("umb", 5, 4, 4)
    torch.testing.assert_close(umbral_height(w, w).diagonal(), w[:, -1])
    for f, hi, lo in ((penumbral_height, 0.7, 0.2), (umbral_height, 3.0, 0.5)):
        p = torch.tensor([[0.3, -0.1, hi]], dtype=torch.float64)
        q = torch.tensor([[0.3, -0.1, lo]], dtype=torch.float64)
        assert float(f(p, q)) == pytest.approx(hi)
    # u_d = v_d: softmax-normalised umbral attention is the Laplacian kernel exp(−γ‖Δ‖) (after Eq. 8)
    r = 0.1
    x = torch.randn(1, 6, 3, dtype=torch.float64)
    x[..., -1] = 0.7
    h = umbral_height(x, x, r)
    d = torch.cdist(x[..., :-1], x[..., :-1])
    torch.testing.assert_close(torch.softmax(-h, -1), torch.softmax(-d / (2 * math.sinh(r)), -1))
    # penumbral: in-cone heights ≤ r, out-of-cone > r; far apart points ~ a/2 (radius of geodesic)
    far = torch.tensor([[0.0, 0.5]], dtype=torch.float64), torch.tensor([[100.0, 0.5]], dtype=torch.float64)
    assert float(penumbral_height(*far)) == pytest.approx(50.0, rel=1e-3)


@pytest.mark.parametrize("cls", [PenumbralConeAttention, UmbralConeAttention])
def test_module_matches_direct_scores_and_chunks(cls):
    torch.manual_seed(1)
    attn = cls(8, 2, chunk_size=3).double()
    with torch.no_grad():
        attn.log_gamma.copy_(torch.tensor([0.3, -0.2]))
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    ang = torch.randn(7, 4, dtype=torch.float64)
    out, w = attn(x, ang, need_weights=True)
    q, k, _ = attn.in_proj(x).view(2, 7, 3, 2, 4).permute(2, 0, 3, 1, 4)
    from cape_pipeline.encodings.rope import apply_rotary

    hang = attn._head_angles(ang, x)
    q, k = apply_rotary(q, hang), apply_rotary(k, hang)  # rotation before the map
    mp = xi_map if cls is PenumbralConeAttention else psi_map
    slow = slow_penumbral if cls is PenumbralConeAttention else slow_umbral
    u, v = mp(q), mp(k)
    ref = torch.empty(2, 2, 7, 7, dtype=torch.float64)
    for b in range(2):
        for h in range(2):
            for i in range(7):
                for j in range(7):
                    ref[b, h, i, j] = slow(u[b, h, i].detach().numpy(), v[b, h, j].detach().numpy())
    ref = torch.softmax(-attn.gamma.detach().view(1, 2, 1, 1) * ref, -1)
    torch.testing.assert_close(w, ref)
    big = cls(8, 2).double()
    big.load_state_dict(attn.state_dict())
    torch.testing.assert_close(big(x, ang), out)


@pytest.mark.parametrize("name", NAMES)
def test_padding_keys_get_no_attention(name):
    attn = build_attention(name, 8, 2)
    x = torch.randn(2, 6, 8)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1, 0] = True
    out, w = attn(x, None, pad, need_weights=True)
    assert (w[0, :, :, 4:] == 0).all() and (w[1, :, :, 0] == 0).all()
    x2 = x.clone()
    x2[0, 4:] = 100.0  # changing padded tokens does not change the others' outputs
    out2 = attn(x2, None, pad)
    torch.testing.assert_close(out2[0, :4], out[0, :4])


@pytest.mark.parametrize("name", NAMES)
def test_registered_and_errors(name):
    assert name in ATTENTIONS
    attn = build_attention(name, 8, 2)
    with pytest.raises(ValueError, match="x: expected"):
        attn(torch.randn(2, 6))
    with pytest.raises(ValueError, match="angles"):
        attn(torch.randn(2, 6, 8), torch.randn(6, 3))
    with pytest.raises(ValueError, match="key_padding_mask"):
        attn(torch.randn(2, 6, 8), None, torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="chunk_size"):
        ATTENTIONS[name](8, 2, chunk_size=0)


@pytest.mark.parametrize("name", NAMES)
def test_backbone_forward_backward(name):
    rng = np.random.default_rng(0)
    m = 6
    angles = rng.uniform(-0.7, 0.7, (m, 8))
    model = build_backbone(
        "scgpt", {"d_model": 16, "n_heads": 2, "n_layers": 1}, n_features=m, pe="cape", attention=name, angles=angles
    )
    x = torch.rand(3, m)
    x[1, :3] = 0.0
    model.fit_data(x.numpy())
    h = model(model.tokenize(x))
    assert torch.isfinite(h).all()
    h.sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
