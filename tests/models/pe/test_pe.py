from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import (
    PE_NAMES,
    ScGPTConfig,
    build_backbone,
    build_pe,
    coexpression_embedding,
)
from cape_pipeline.models.attention import DotProductAttention
from cape_pipeline.models.backbones.tokens import quantile_bins, select_tokens
from cape_pipeline.models.pe import LearnedSmallNormPE, relative_buckets
from cape_pipeline.models.positions import FeaturePositions

M, D, H = 12, 16, 2
CFG = ScGPTConfig(d_model=D, n_heads=H, n_layers=2, max_tokens=0, tokens="all")
EQUIVARIANT = [p for p in PE_NAMES if p not in ("trainable-relative", "rank-value")]  # rank ties: by index
# every per-feature row: the PE's tables and the backbones' identity embeddings
PER_FEATURE_KEYS = ("pe.angles", "pe.e", "pe.table", "gene_embed.weight", "gene_vectors", "site_embed.weight")


def _inputs(seed: int = 0, b: int = 4) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, M, generator=g) * 3
    x[torch.rand(b, M, generator=g) < 0.3] = 0.0
    rng = np.random.default_rng(seed)
    return x, rng.uniform(-math.pi / 4, math.pi / 4, (M, D // 2)), rng.normal(size=(M, D)).astype(np.float32)


# a spanning forest over the M features (ape-tree): 0 → 1 → 2, 0 → 3, 1 → 4, 5 → 6 → 7, the rest roots
PARENT = np.array([-1, 0, 1, 0, 1, -1, 5, 6] + [-1] * (M - 8))
WEIGHT = np.array([0, 0.9, 0.5, 0.4, 0.8, 0, 0.7, 0.3] + [0] * (M - 8))


def _positions(angles: np.ndarray, perm: np.ndarray | None = None) -> FeaturePositions:
    """The angles and the forest, both relabelled by ``perm`` (new feature i = old ``perm[i]``)."""
    parent, weight = PARENT, WEIGHT
    if perm is not None:
        inv = np.argsort(perm)
        angles, weight, parent = angles[perm], weight[perm], parent[perm]
        parent = np.where(parent >= 0, inv[np.maximum(parent, 0)], -1)
    return FeaturePositions(angles=angles, parent=parent, parent_weight=weight)


def _model(pe: str, angles, table: np.ndarray, seed: int = 0, cfg=CFG, backbone: str = "scgpt"):
    torch.manual_seed(seed)
    pos = angles if isinstance(angles, FeaturePositions) else _positions(angles)
    return build_backbone(backbone, cfg, n_features=M, pe=pe, angles=pos, static_table=table).eval()


def _permuted_copy(model, perm: np.ndarray, pe: str, angles, table, cfg=CFG, backbone: str = "scgpt"):
    """Same weights, but every per-feature row (angles, tables, identity, the forest) permuted
    with the features (the forest's parent indices relabelled too)."""
    other = _model(pe, _positions(angles, perm), table[perm], cfg=cfg, backbone=backbone)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    for k in (*PER_FEATURE_KEYS, "pe.branch"):
        if k in sd:
            sd[k] = sd[k][torch.as_tensor(perm)]
    if "pe.parent" in sd:
        sd["pe.parent"] = other.state_dict()["pe.parent"]
    other.load_state_dict(sd)
    return other


@pytest.mark.parametrize("identity", [True, False])
@pytest.mark.parametrize("backbone", ["scgpt", "scbert", "methylgpt"])
@pytest.mark.parametrize("pe", EQUIVARIANT)
def test_permuting_features_with_their_pe_rows_permutes_outputs(pe, backbone, identity):
    x, angles, table = _inputs()
    cfg = {"d_model": D, "n_heads": H, "n_layers": 2, "max_tokens": 0, "tokens": "all", "identity": identity}
    model = _model(pe, angles, table, cfg=cfg, backbone=backbone)
    model.fit_data(x.numpy())
    perm = np.random.default_rng(1).permutation(M)
    other = _permuted_copy(model, perm, pe, angles, table, cfg=cfg, backbone=backbone)
    with torch.no_grad():
        h = model(model.tokenize(x))
        hp = other(other.tokenize(x[:, perm]))
    torch.testing.assert_close(hp[:, 0], h[:, 0], atol=1e-5, rtol=1e-4)  # <cls>: invariant
    torch.testing.assert_close(hp[:, 1:], h[:, 1:][:, perm], atol=1e-5, rtol=1e-4)  # tokens: equivariant


@pytest.mark.parametrize("pe", ["cape", "trainable-absolute", "none"])
@pytest.mark.parametrize("tokens", ["all", "expressed"])
def test_topk_tokens_keep_cls_invariant(pe, tokens):
    x, angles, table = _inputs(b=3)
    cfg = ScGPTConfig(d_model=D, n_heads=H, n_layers=2, max_tokens=5, tokens=tokens)
    model = _model(pe, angles, table, cfg=cfg)
    perm = np.random.default_rng(2).permutation(M)
    other = _permuted_copy(model, perm, pe, angles, table, cfg=cfg)
    with torch.no_grad():
        tok = model.tokenize(x)
        assert tok.idx.shape == (3, 5)
        h, hp = model(tok), other(other.tokenize(x[:, perm]))
    torch.testing.assert_close(hp[:, 0], h[:, 0], atol=1e-5, rtol=1e-4)


def test_relative_pe_depends_on_feature_order():
    """trainable-relative is *not* permutation-equivariant: the bias uses var_names order."""
    x, angles, table = _inputs()
    model = _model("trainable-relative", angles, table)
    with torch.no_grad():  # make the relative terms non-zero
        model.pe.u.normal_()
        model.pe.v.normal_()
    perm = np.random.default_rng(1).permutation(M)
    other = _permuted_copy(model, perm, "trainable-relative", angles, table)
    with torch.no_grad():
        h, hp = model(model.tokenize(x)), other(other.tokenize(x[:, perm]))
    assert not torch.allclose(hp[:, 0], h[:, 0], atol=1e-4)
    # ...but a shift of all indices (same differences) is invisible: translation invariance
    bias_fn = model.pe.score_bias(torch.arange(M)[None])
    bias_shift = model.pe.score_bias(torch.arange(M)[None] + 7)
    q = torch.randn(1, H, M + 1, D // H)
    k = torch.randn(1, H, M + 1, D // H)
    b0, b1 = bias_fn(q, k), bias_shift(q, k)
    torch.testing.assert_close(b0, b1)
    assert b0.shape == (1, H, M + 1, M + 1)


def test_equivariance_test_can_fail_without_permuting_tables():
    x, angles, table = _inputs()
    model = _model("cape", angles, table)
    perm = np.random.default_rng(1).permutation(M)
    with torch.no_grad():
        h, hp = model(model.tokenize(x)), model(model.tokenize(x[:, perm]))
    assert not torch.allclose(hp[:, 0], h[:, 0], atol=1e-4)


def _rot(phi: torch.Tensor) -> torch.Tensor:
    """Block-diagonal R(φ) of Eq. 26 for one token: (d,) → (2d, 2d)."""
    blocks = [torch.tensor([[math.cos(p), -math.sin(p)], [math.sin(p), math.cos(p)]]) for p in phi.tolist()]
    return torch.block_diag(*blocks)


def test_expressed_tokens_pad_and_mask():
    """Only expressed genes are tokens; shorter rows are padded and the padding changes nothing."""
    x, angles, table = _inputs(b=3)
    x[0, :] = 0.0
    x[0, 3] = 1.5  # one expressed gene in cell 0
    cfg = ScGPTConfig(d_model=D, n_heads=H, n_layers=2, max_tokens=0, tokens="expressed")
    model = _model("cape", angles, table, cfg=cfg)
    tok = model.tokenize(x)
    n_expr = (x > 0).sum(1)
    assert tok.idx.shape[1] == int(n_expr.max())
    assert tok.pad.sum(1).tolist() == (int(n_expr.max()) - n_expr).tolist()
    assert tok.idx[0, 0] == 3 and tok.pad[0, 1:].all() and not tok.pad[0, 0]
    with torch.no_grad():
        alone = model(model.tokenize(x[:1]))  # cell 0 by itself: no padding at all
        batched = model(tok)
    torch.testing.assert_close(batched[0, :2], alone[0], atol=1e-5, rtol=1e-4)


def test_cape_attention_matches_manual_rotary():
    torch.manual_seed(0)
    t = 5
    attn = DotProductAttention(D, H).eval()
    x = torch.randn(2, t, D)
    angles = torch.rand(t, D // 2) * 1.5 - 0.75
    out = attn(x, angles=angles)
    # manual: q_m <- R(φ_m) W_q v_m per head slice (Eq. 24), softmax(q k^T / sqrt(Dh)) v
    wq, wk, wv = attn.in_proj.weight.split(D)
    bq, bk, bv = attn.in_proj.bias.split(D)
    dh = D // H
    heads = []
    for h in range(H):
        sl = slice(h * dh, (h + 1) * dh)
        q = x @ wq[sl].T + bq[sl]
        k = x @ wk[sl].T + bk[sl]
        v = x @ wv[sl].T + bv[sl]
        ang = angles[:, h * dh // 2 : (h + 1) * dh // 2]
        rq = torch.stack([q[:, m] @ _rot(ang[m]).T for m in range(t)], dim=1)
        rk = torch.stack([k[:, m] @ _rot(ang[m]).T for m in range(t)], dim=1)
        w = torch.softmax(rq @ rk.transpose(1, 2) / math.sqrt(dh), dim=-1)
        heads.append(w @ v)
    ref = attn.out_proj(torch.cat(heads, dim=-1))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    # Eq. 25: only angle differences matter -> a common shift changes nothing
    torch.testing.assert_close(attn(x, angles=angles + 0.3), out, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(attn(x, angles=angles * 2), out, atol=1e-4)


def test_one_attention_module_with_score_bias_and_padding():
    """The backbones' attention is models.attention.rotary.RotaryMultiheadAttention itself; bias and padding add up."""
    from cape_pipeline.models.attention.rotary import RotaryMultiheadAttention

    assert DotProductAttention is RotaryMultiheadAttention
    model = build_backbone("scgpt", CFG, n_features=M, pe="none")
    assert all(type(b.attn) is RotaryMultiheadAttention for b in model.blocks)
    torch.manual_seed(0)
    attn = RotaryMultiheadAttention(D, H).eval()
    x, a = torch.randn(2, 7, D), torch.rand(7, D // 2) - 0.5
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 5:] = True
    bias = torch.randn(2, H, 7, 7)
    out, w = attn(x, a, pad, need_weights=True, score_bias=lambda q, k: bias)
    fused = attn(x, a, pad, score_bias=lambda q, k: bias)
    torch.testing.assert_close(fused, out, atol=1e-5, rtol=1e-4)
    assert torch.all(w[1, :, :, 5:] == 0)  # padded keys get no weight
    assert not torch.allclose(attn(x, a, pad), fused, atol=1e-4)  # the bias is used


def test_per_token_angles_equal_shared_angles():
    torch.manual_seed(0)
    attn = DotProductAttention(D, H).eval()
    x = torch.randn(3, 4, D)
    a = torch.rand(4, D // 2)
    torch.testing.assert_close(attn(x, angles=a.expand(3, 4, D // 2)), attn(x, angles=a))


def test_cape_input_rotates_embedding_once():
    _, angles, table = _inputs()
    pe = build_pe("cape-input", n_features=M, d_model=D, n_heads=H, angles=angles)
    h = torch.randn(2, M, D)
    idx = torch.arange(M).expand(2, M)
    out = pe.embed(h, idx)
    ref = torch.stack([h[:, m] @ _rot(torch.as_tensor(angles[m], dtype=torch.float32)).T for m in range(M)], dim=1)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out.norm(dim=-1), h.norm(dim=-1))  # rotation preserves norms
    assert pe.rotary(idx) is None


@pytest.mark.parametrize("sigma", [0.1, 0.2])
def test_small_norm_init_has_requested_sigma(sigma):
    torch.manual_seed(0)
    pe = LearnedSmallNormPE(2000, 64, sigma=sigma)
    assert pe.table.requires_grad
    assert abs(float(pe.table.std()) - sigma) < 0.02 * sigma
    assert abs(float(pe.table.mean())) < 0.01 * sigma + 1e-3
    torch.manual_seed(0)
    big = build_pe("trainable-absolute", n_features=2000, d_model=64, n_heads=4)
    assert abs(float(big.table.std()) - 1.0) < 0.02


def test_small_norm_sigma_is_learned():
    """σ = σ₀·e^g: initial PE scale is σ₀, g gets a gradient and moves under a step."""
    torch.manual_seed(0)
    pe = LearnedSmallNormPE(2000, 64, sigma=0.2)
    h, idx = torch.zeros(1, 2000, 64), torch.arange(2000)[None]
    init = pe.embed(h, idx)
    assert abs(float(init.pow(2).mean().sqrt()) - 0.2) < 0.02 * 0.2  # RMS of the initial PE = σ₀
    opt = torch.optim.SGD(pe.parameters(), lr=0.1)
    (pe.embed(h, idx) - 2 * init.detach()).pow(2).mean().backward()  # target: a larger PE
    assert pe.log_gain.grad is not None and float(pe.log_gain.grad) < 0
    opt.step()
    assert float(pe.log_gain) > 0  # σ grew


def test_small_norm_loads_state_dict_without_sigma():
    """Models saved before σ was learned (no ``pe.log_gain``) load strictly, with σ = σ₀."""
    x, angles, table = _inputs()
    model = _model("learned-small-norm", angles, table)
    sd = {k: v for k, v in model.state_dict().items() if k != "pe.log_gain"}
    other = _model("learned-small-norm", angles, table, seed=1)
    with torch.no_grad():
        other.pe.log_gain.fill_(1.0)
    other.load_state_dict(sd)
    assert float(other.pe.log_gain) == 0.0
    with torch.no_grad():
        torch.testing.assert_close(other(other.tokenize(x)), model(model.tokenize(x)))


def test_static_table_is_fixed_and_from_coexpression():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(500, 3))
    x = np.hstack([z, z[:, :1] + 0.1 * rng.normal(size=(500, 1))])  # feature 3 ≈ feature 0
    emb = coexpression_embedding(x, 8)
    assert emb.shape == (4, 8) and emb.dtype == np.float32
    assert np.allclose(emb[:, 4:], 0)
    c = np.corrcoef(x.T)
    g = emb @ emb.T
    assert np.allclose(g / g[0, 0], c / c[0, 0], atol=0.05)  # rows reproduce the correlation
    pe = build_pe("static-absolute", n_features=4, d_model=8, n_heads=2, static_table=emb)
    assert not any(p.requires_grad for p in pe.parameters())


def test_bad_angles_and_names_give_clear_errors():
    _, angles, table = _inputs()
    with pytest.raises(CapeDataError, match="rows"):
        build_pe("cape", n_features=M + 1, d_model=D, n_heads=H, angles=angles)
    with pytest.raises(CapeDataError, match="D/2"):
        build_pe("cape", n_features=M, d_model=2 * D, n_heads=H, angles=angles)
    with pytest.raises(CapeDataError, match="required"):
        build_pe("cape-input", n_features=M, d_model=D, n_heads=H, angles=None)
    with pytest.raises(CapeDataError, match="2-D"):
        build_pe("cape", n_features=M, d_model=D, n_heads=H, angles=angles[:, 0])
    bad = angles.copy()
    bad[0, 0] = np.nan
    with pytest.raises(CapeDataError, match="NaN"):
        build_pe("cape", n_features=M, d_model=D, n_heads=H, angles=bad)
    with pytest.raises(CapeDataError, match="static_table"):
        build_pe("static-absolute", n_features=M, d_model=D, n_heads=H)
    with pytest.raises(CapeConfigError, match="unknown"):
        build_pe("sinusoidal", n_features=M, d_model=D, n_heads=H)
    # cape-additive takes any angle width (projected to D)
    pe = build_pe("cape-additive", n_features=M, d_model=D, n_heads=H, angles=angles[:, :3])
    assert pe.embed(torch.zeros(1, M, D), torch.arange(M)[None]).shape == (1, M, D)


def test_relative_buckets_range_and_sign():
    d = torch.arange(-300, 301)
    b = relative_buckets(d, 32, 256)
    assert int(b.min()) >= 0 and int(b.max()) < 32
    assert (b[d > 0] >= 16).all() and (b[d <= 0] < 16).all()
    assert (torch.diff(b[d > 0]) >= 0).all()  # monotone in distance


def test_token_selection_and_bins():
    x = torch.tensor([[0.0, 5.0, 1.0, float("nan"), 3.0, 0.0]])
    assert select_tokens(x, 3)[0].tolist() == [[1, 2, 4]]
    assert select_tokens(x, 0)[0].tolist() == [list(range(6))] and select_tokens(x, 0)[1] is None
    idx, pad = select_tokens(torch.cat([x, torch.zeros(1, 6)]), 0, expressed_only=True)
    assert idx.tolist() == [[1, 2, 4], [0, 0, 0]] and pad.tolist() == [[False] * 3, [True] * 3]
    b = quantile_bins(x, 4)
    assert b[0, 0] == 0 and b[0, 5] == 0 and b[0, 3] == 0
    assert b[0, 2] < b[0, 4] < b[0, 1] and int(b.max()) <= 3


def test_default_is_the_earlier_name_of_none() -> None:
    """``default`` and ``none`` are the same model (the identity alone): ``none`` is the name,
    ``default`` maps to it with a FutureWarning, and still switches the identity on under
    ``identity=False`` as it did, so a model saved under that name loads as it was."""
    from cape_pipeline.models import resolve_pe
    from cape_pipeline.models.pe import DefaultPE, NoPE

    assert "default" not in PE_NAMES and "none" in PE_NAMES
    with pytest.warns(FutureWarning, match="'default' is now called 'none'"):
        assert resolve_pe("default") == "none"
    assert resolve_pe("cape") == "cape"
    with pytest.warns(FutureWarning):
        assert type(build_pe("default", n_features=M, d_model=D, n_heads=H)) is NoPE
    with pytest.warns(FutureWarning, match="NoPE"):
        assert isinstance(DefaultPE(), NoPE)
    x = _inputs()[0]
    for identity in (True, False):
        cfg = ScGPTConfig(d_model=D, n_heads=H, n_layers=1, max_tokens=0, tokens="all", identity=identity)
        torch.manual_seed(0)
        with pytest.warns(FutureWarning):
            old = build_backbone("scgpt", cfg, n_features=M, pe="default").eval()
        torch.manual_seed(0)
        new = build_backbone("scgpt", ScGPTConfig(**{**cfg.__dict__, "identity": True}), n_features=M, pe="none").eval()
        assert old.pe_name == "none" and old.use_identity and old.config.identity
        assert old.state_dict().keys() == new.state_dict().keys()
        with torch.no_grad():
            torch.testing.assert_close(old(old.tokenize(x)), new(new.tokenize(x)), rtol=0, atol=0)
