"""RiemannFormer attention (paper 001) on hyperboloid positions: the RoPE limit (s → 1, σ → ∞),
the conformal score factor s^{(ρ_m+ρ_n)/2} (Eq. 9), Ω against the Poincaré-ball distance
(Eqs. 21–22), <cls> exemption, no renormalisation, chunking, padding and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cape_pipeline.models.attention.riemann import (
    RiemannAttention,
    lorentz_norm,
    lorentz_pairwise_distance,
)
from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

B, H, T, DIM, D_HYP = 2, 2, 5, 8, 3
M = 1 + T


def hyperboloid(*lead, d=D_HYP, scale=1.0, seed=0, dtype=torch.float64):
    """Random points (x0, x1..xd) with x0 = sqrt(1 + |x_{1:}|^2); the <cls> slot is the origin."""
    g = torch.Generator().manual_seed(seed)
    tail = torch.randn(*lead, d, generator=g, dtype=dtype) * scale
    pts = torch.cat([torch.sqrt(1 + (tail * tail).sum(-1, keepdim=True)), tail], dim=-1)
    pts[..., 0, 0], pts[..., 0, 1:] = 1.0, 0.0
    return pts


def poincare_dist(x, y):
    """Independent d_H: map hyperboloid → ball (u = x_{1:}/(1+x0)), then the ball formula."""
    u, v = x[1:] / (1 + x[0]), y[1:] / (1 + y[0])
    arg = 1 + 2 * np.sum((u - v) ** 2) / ((1 - np.sum(u * u)) * (1 - np.sum(v * v)))
    return math.acosh(max(arg, 1.0))


def make(seed=0, dtype=torch.float64, **kw):
    torch.manual_seed(seed)
    return RiemannAttention(DIM, H, **kw).to(dtype)


def inputs(seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, M, DIM, generator=g, dtype=dtype)
    angles = torch.rand(B, M, DIM // 2, generator=g, dtype=dtype) * 3
    return x, angles


def softmax_ref(attn, x, angles, pos, pad=None):
    """S of Eq. 9 with m → ρ_m by hand (float64): s_h^{(ρ_m+ρ_n)/2} q_m·k_n / sqrt(Dh)."""
    q, k, _, _ = attn.project(x, angles, None)
    s = (torch.exp(attn.w) / (torch.exp(attn.w) + attn.alpha)).detach().numpy()
    rho = np.arccosh(np.maximum(pos[..., 0].numpy(), 1.0))
    rho[:, 0] = 0.0  # <cls>
    raw = (q @ k.transpose(-2, -1)).detach().numpy() / math.sqrt(DIM // H)
    fac = s[None, :, None, None] ** ((rho[:, None, :, None] + rho[:, None, None, :]) / 2)
    scores = raw * fac
    if pad is not None:
        scores = np.where(pad.numpy()[:, None, None, :], -np.inf, scores)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), raw


def omega_ref(pos, sigma):
    """Ω_mn = exp(−d_H²/(2σ_h²)), <cls> row/col = 1, via the Poincaré formula; (B, H, M, M)."""
    d = np.array(
        [[[poincare_dist(p[i], p[j]) for j in range(M)] for i in range(M)] for p in pos.numpy()]
    )
    om = np.exp(-(d[:, None] ** 2) / (2 * sigma[None, :, None, None] ** 2))
    om[:, :, 0, :] = om[:, :, :, 0] = 1.0
    return om


def test_reduces_to_rope_when_s_to_one_and_sigma_huge():
    attn = make(sigma=1e6)
    with torch.no_grad():
        attn.w.fill_(50.0)
    rope = RotaryMultiheadAttention(DIM, H).double()
    rope.in_proj.load_state_dict(attn.in_proj.state_dict())
    rope.out_proj.load_state_dict(attn.out_proj.state_dict())
    x, angles = inputs()
    pos = hyperboloid(B, M, scale=1.5)
    pad = torch.zeros(B, M, dtype=torch.bool)
    pad[1, -2:] = True
    got = attn(x, angles, pad, positions=pos)
    torch.testing.assert_close(got, rope(x, angles, pad), rtol=1e-9, atol=1e-9)
    assert not torch.allclose(got, rope(x, None, pad), atol=1e-3)  # the angles do matter
    bias = lambda q, k: torch.tanh(q @ k.transpose(-2, -1))  # noqa: E731 - a relative-PE stand-in
    got_b = attn(x, angles, pad, score_bias=bias, positions=pos)
    torch.testing.assert_close(got_b, rope(x, angles, pad, score_bias=bias), rtol=1e-9, atol=1e-9)
    assert not torch.allclose(got_b, got, atol=1e-3)


def test_score_scaling_is_s_to_mean_rho():
    attn = make(sigma=1e6)  # Ω ≡ 1 → weights = S; w = 0: s = 1/1.1 per head
    with torch.no_grad():
        attn.w.copy_(torch.tensor([0.0, -1.0]))
    x, angles = inputs(seed=2)
    pos = hyperboloid(B, M, scale=2.0, seed=3)
    _, weights = attn(x, angles, need_weights=True, positions=pos)
    ref, raw = softmax_ref(attn, x, angles, pos)
    np.testing.assert_allclose(weights.detach().numpy(), ref, rtol=1e-9, atol=1e-12)
    e = np.exp(raw - raw.max(-1, keepdims=True))
    assert np.abs(e / e.sum(-1, keepdims=True) - ref).max() > 1e-2  # the factor is not trivial


def test_distances_match_poincare_ball_formula():
    pts = hyperboloid(7, scale=1.2, seed=4)
    pts[0] = hyperboloid(2, d=D_HYP, scale=3.0, seed=5)[1]  # one far point as well
    x, y = pts[:4], pts[3:]
    ref = np.array([[poincare_dist(a, b) for b in y.numpy()] for a in x.numpy()])
    np.testing.assert_allclose(lorentz_pairwise_distance(x, y).numpy(), ref, rtol=1e-7, atol=1e-7)
    origin = torch.zeros(D_HYP + 1, dtype=torch.float64)
    origin[0] = 1.0
    norms = [poincare_dist(origin.numpy(), p) for p in pts.numpy()]
    np.testing.assert_allclose(lorentz_norm(pts).numpy(), norms, rtol=1e-7, atol=1e-7)
    assert lorentz_pairwise_distance(pts, pts).diagonal().abs().max() < 1e-6


def test_omega_matches_poincare_reference_and_cls_exempt():
    attn = make(sigma=0.8)
    with torch.no_grad():
        attn.log_sigma.copy_(torch.log(torch.tensor([0.8, 2.5])))
    x, angles = inputs(seed=6)
    pos = hyperboloid(B, M, scale=1.0, seed=7)
    pos[:, 0] = hyperboloid(B, 2, scale=3.0, seed=8)[:, 1]  # <cls> point far away: must be ignored
    out, weights = attn(x, angles, need_weights=True, positions=pos)
    s_ref, _ = softmax_ref(attn, x, angles, pos)
    om = omega_ref(pos, attn.log_sigma.exp().detach().numpy())
    np.testing.assert_allclose(weights.detach().numpy(), s_ref * om, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        weights[:, :, 0].detach().numpy(), s_ref[:, :, 0], rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        weights[:, :, :, 0].detach().numpy(), s_ref[:, :, :, 0], rtol=1e-9, atol=1e-12
    )
    assert (om[:, :, 1:, 1:] < 0.9).any()  # Ω is exercised off the diagonal


def test_output_is_s_omega_v_without_renormalisation():
    attn = make(sigma=0.5)
    x, angles = inputs(seed=9)
    pos = hyperboloid(B, M, scale=2.0, seed=10)
    out, weights = attn(x, angles, need_weights=True, positions=pos)
    sums = weights.sum(-1)
    torch.testing.assert_close(sums[:, :, 0], torch.ones(B, H, dtype=sums.dtype))  # <cls> row: S
    assert (sums[:, :, 1:] < 1 - 1e-3).all()
    _, _, v, _ = attn.project(x, angles, None)
    ref = attn.out_proj((weights @ v).transpose(1, 2).reshape(B, M, DIM))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("need_weights", [False, True])
def test_chunked_equals_unchunked(need_weights):
    """Chunking changes only the order of the sums: in float64 (ε = 1.1e-16, sums of ≤ M terms
    of order 1) the results agree to ~M·ε, so 1e-12 leaves room on any processor; in float32 the
    same test would be about rounding (ε = 6e-8), not about the chunking logic."""
    big, small = make(dtype=torch.float64, chunk_size=1000), make(dtype=torch.float64, chunk_size=1)
    small.load_state_dict(big.state_dict())
    x, angles = inputs(seed=11, dtype=torch.float64)
    pos = hyperboloid(B, M, scale=1.0, seed=12, dtype=torch.float64)
    pad = torch.zeros(B, M, dtype=torch.bool)
    pad[0, -1] = True
    a = big(x, angles, pad, need_weights, positions=pos)
    b = small(x, angles, pad, need_weights, positions=pos)
    for u, v in zip(a if need_weights else [a], b if need_weights else [b], strict=True):
        torch.testing.assert_close(u, v, rtol=0, atol=1e-12)


def test_key_padding_mask_gives_zero_weight():
    attn = make(sigma=2.0)
    x, angles = inputs(seed=13)
    pos = hyperboloid(B, M, seed=14)
    pad = torch.zeros(B, M, dtype=torch.bool)
    pad[0, 3], pad[1, -2:] = True, True
    out, weights = attn(x, angles, pad, need_weights=True, positions=pos)
    assert torch.all(weights.permute(0, 2, 1, 3)[pad[:, None, None, :].expand(B, M, H, M)] == 0)
    x2 = x.clone()
    x2[pad] = 100.0  # changing padded tokens leaves the others' outputs untouched
    out2 = attn(x2, angles, pad, positions=pos)
    torch.testing.assert_close(out2[~pad], out[~pad], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_gradients_at_coincident_points_and_origin(dtype):
    attn = make(dtype=dtype, sigma=0.7)
    x, angles = inputs(seed=15, dtype=dtype)
    x.requires_grad_(True)
    pos = hyperboloid(B, M, seed=16, dtype=dtype)
    pos[:, 2] = pos[:, 1]  # two tokens share a point (d = 0)
    pos[:, 3] = 0.0
    pos[:, 3, 0] = 1.0  # a token at the origin (ρ = 0)
    pos.requires_grad_(True)
    out, weights = attn(x, angles, need_weights=True, positions=pos)
    (out.square().sum() + weights.sum()).backward()
    for name, g in [
        ("x", x.grad),
        ("w", attn.w.grad),
        ("log_sigma", attn.log_sigma.grad),
        ("pos", pos.grad),
    ]:
        assert g is not None and torch.isfinite(g).all(), name
    assert attn.w.grad.abs().sum() > 0 and attn.log_sigma.grad.abs().sum() > 0
    pts = pos.detach()[0].clone().requires_grad_(True)
    (lorentz_pairwise_distance(pts, pts).sum() + lorentz_norm(pts).sum()).backward()
    assert torch.isfinite(pts.grad).all()


def test_errors_and_flags():
    attn = make()
    x, angles = inputs()
    assert RiemannAttention.needs_positions is True
    with pytest.raises(ValueError, match="hyperboloid"):
        attn(x, angles)
    with pytest.raises(ValueError, match="positions"):
        attn(x, angles, positions=torch.ones(B, M + 1, 3, dtype=x.dtype))
    for kw, name in [
        ({"alpha": 0.0}, "alpha"),
        ({"sigma": -1.0}, "sigma"),
        ({"chunk_size": 0}, "chunk_size"),
    ]:
        with pytest.raises(ValueError, match=name):
            RiemannAttention(DIM, H, **kw)


def test_backbone_with_riemann_attention_trains_and_needs_the_points():
    """The backbone gives the attention each token's hyperboloid point (<cls> at the origin)."""
    import numpy as np

    from cape_pipeline.errors import CapeDataError
    from cape_pipeline.models import build_backbone
    from cape_pipeline.models.positions import FeaturePositions

    m = 6
    rng = np.random.default_rng(0)
    e = rng.uniform(-0.3, 0.3, (m, 4))
    sq = (e**2).sum(1, keepdims=True)
    hyp = np.hstack([(1 + sq) / (1 - sq), 2 * e / (1 - sq)])
    cfg = {"d_model": 8, "n_heads": 2, "n_layers": 1}
    pos = FeaturePositions(angles=e, hyperboloid=hyp)
    model = build_backbone("scgpt", cfg, n_features=m, pe="cape", attention="riemann", angles=pos)
    torch.testing.assert_close(model.hyperboloid, torch.as_tensor(hyp, dtype=torch.float32))
    seen = []
    model.blocks[0].attn.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs["positions"]), with_kwargs=True)
    x = torch.rand(3, m)
    h = model(model.tokenize(x))
    h.sum().backward()
    assert torch.isfinite(h).all() and model.blocks[0].attn.w.grad is not None
    tok = model.tokenize(x)
    assert seen[0].shape == (3, 1 + tok.idx.shape[1], 5)
    torch.testing.assert_close(seen[0][:, 0], torch.tensor([[1.0, 0, 0, 0, 0]]).expand(3, 5))
    torch.testing.assert_close(seen[0][:, 1:], model.hyperboloid[tok.idx])
    with pytest.raises(CapeDataError, match="hyperboloid point"):
        build_backbone("scgpt", cfg, n_features=m, pe="cape", attention="riemann", angles=e)
