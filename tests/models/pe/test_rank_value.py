"""Geneformer rank-value PE (``pe="rank-value"``, :mod:`cape_pipeline.models.pe.rank_value`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cape_pipeline.models.backbones.blocks as blocks
from cape_pipeline.models import TokenBatch, build_backbone
from cape_pipeline.models.pe import build_pe
from cape_pipeline.models.pe.rank_value import RankValuePE, nonzero_medians, token_ranks

M, D, H = 10, 16, 2


def _build_pe(name, **kw):
    """build_pe with ``rank-value`` registered (the registry lives in pe.py)."""
    if name == "rank-value":
        return RankValuePE(kw["n_features"], kw["d_model"])
    return build_pe(name, **kw)


@pytest.fixture
def rank_value_registered(monkeypatch):
    monkeypatch.setattr(blocks, "build_pe", _build_pe)


def _data(seed: int = 0, n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, M, generator=g) * 3 + 0.1
    x[torch.rand(n, M, generator=g) < 0.4] = 0.0
    return x


def _model(seed: int = 0, backbone: str = "scgpt", **cfg):
    torch.manual_seed(seed)
    c = {"d_model": D, "n_heads": H, "n_layers": 2, **cfg}
    return build_backbone(backbone, c, n_features=M, pe="rank-value").eval()


def test_medians_use_nonzero_finite_values_only():
    x = np.array([[0.0, 1.0, 0.0], [2.0, 3.0, 0.0], [4.0, np.nan, 0.0], [0.0, 5.0, -1.0]])
    med = nonzero_medians(x)
    assert med.dtype == np.float32
    # col 0: median(2, 4) = 3; col 1: median(1, 3, 5) = 3; col 2: only -1 → non-positive → 1
    np.testing.assert_allclose(med, [3.0, 3.0, 1.0])
    np.testing.assert_allclose(nonzero_medians(np.zeros((4, 2))), [1.0, 1.0])


def test_ranks_hand_example_with_ties_and_padding():
    score = torch.tensor([[0.5, 2.0, 0.5, 1.0, 0.0], [3.0, 1.0, 0.0, 9.0, 9.0]])
    idx = torch.tensor([[1, 3, 4, 7, 0], [2, 5, 0, 0, 0]])
    ranked = torch.tensor([[True, True, True, True, False], [True, True, False, False, False]])
    r = token_ranks(score, idx, ranked)
    # row 0: 2.0 → 0, 1.0 → 1, the tie 0.5/0.5 → lower feature index (1 before 4) first
    assert r[0, :4].tolist() == [2, 0, 3, 1]
    assert r[1, :2].tolist() == [0, 1]  # padding (score 9.0) never outranks real tokens
    # ties broken by feature index, not by position in the row
    r2 = token_ranks(torch.tensor([[1.0, 1.0]]), torch.tensor([[5, 2]]), torch.ones(1, 2, dtype=torch.bool))
    assert r2.tolist() == [[1, 0]]


def test_ranks_use_values_normalized_by_medians():
    pe = RankValuePE(4, D)
    pe.medians.copy_(torch.tensor([1.0, 10.0, 0.5, 1.0]))
    idx = torch.tensor([[0, 1, 2, 3]])
    values = torch.tensor([[2.0, 10.0, 0.75, float("nan")]])  # normalized 2, 1, 1.5, missing
    hide = torch.tensor([[False, False, False, False]])
    rank, ranked = pe.ranks(idx, values, None, hide)
    assert ranked.tolist() == [[True, True, True, False]]
    assert rank[0, :3].tolist() == [0, 2, 1]
    # a hidden token is not ranked and the others close the gap (its rank is not leaked)
    rank, ranked = pe.ranks(idx, values, None, torch.tensor([[True, False, False, False]]))
    assert ranked.tolist() == [[False, True, True, False]]
    assert rank[0, 1:3].tolist() == [1, 0]


def test_embed_adds_rank_rows_only_to_ranked_tokens():
    pe = RankValuePE(4, D)
    h = torch.randn(1, 4, D)
    idx = torch.tensor([[0, 1, 2, 0]])
    out = pe.embed(h, idx, values=torch.tensor([[1.0, 3.0, 2.0, 0.0]]), pad=torch.tensor([[0, 0, 0, 1]]).bool())
    torch.testing.assert_close(out[0, :3], h[0, :3] + pe.table[[2, 0, 1]])
    torch.testing.assert_close(out[0, 3], h[0, 3])
    with pytest.raises(ValueError, match="values"):
        pe.embed(h, idx)


def test_fit_data_sets_medians_and_survives_state_dict_reload(rank_value_registered):
    x = _data()
    model = _model(backbone="methylgpt")
    model.fit_data(x.numpy())  # TokenTransformer.fit_data → pe.fit_data (methylgpt: no override)
    np.testing.assert_allclose(model.pe.medians.numpy(), nonzero_medians(x.numpy()))
    other = _model(seed=5, backbone="methylgpt")
    other.load_state_dict(model.state_dict())
    torch.testing.assert_close(other.pe.medians, model.pe.medians)
    with torch.no_grad():
        torch.testing.assert_close(other(other.tokenize(x)), model(model.tokenize(x)))


def test_output_changes_with_value_order_but_not_with_per_gene_scaling(rank_value_registered):
    x = _data()
    model = _model(backbone="methylgpt", identity=False)  # continuous values; no identity table
    model.fit_data(x.numpy())
    with torch.no_grad():
        tok = model.tokenize(x)
        base = model(tok)
        # same token values, but the ranks come from reordered values → different output
        perm = torch.tensor([[1, 0] + list(range(2, tok.values.shape[1]))])
        swapped = TokenBatch(tok.idx, tok.values[:, perm[0]], tok.missing, tok.bins, tok.pad)
        rank_a, _ = model.pe.ranks(tok.idx, tok.values, tok.pad)
        rank_b, _ = model.pe.ranks(tok.idx, swapped.values, tok.pad)
        changed = (rank_a != rank_b).any(dim=1)
        assert bool(changed.any())
        pe_only = model.pe.embed(torch.zeros(*tok.idx.shape, D), tok.idx, values=swapped.values, pad=tok.pad)
        pe_base = model.pe.embed(torch.zeros(*tok.idx.shape, D), tok.idx, values=tok.values, pad=tok.pad)
        assert not torch.allclose(pe_only[changed], pe_base[changed])
        # scaling gene j's values in every cell by c_j > 0 scales its median by c_j: same ranks
        c = torch.rand(M, generator=torch.Generator().manual_seed(3)) * 5 + 0.2
        scaled = model.pe.__class__(M, D)
        scaled.fit_data((x * c).numpy())
        torch.testing.assert_close(scaled.medians, model.pe.medians * c)
        rank_c, _ = scaled.ranks(tok.idx, tok.values * c[tok.idx], tok.pad)
        assert torch.equal(rank_c, rank_a)
        # per-cell positive scaling (Geneformer's total-count normalization) leaves ranks alike
        s = torch.rand(x.shape[0], 1) + 0.5
        assert torch.equal(model.pe.ranks(tok.idx, tok.values * s, tok.pad)[0], rank_a)
        # and the whole backbone's <cls> output depends on the value ranks
        assert base.shape == (x.shape[0], 1 + tok.idx.shape[1], D)


@pytest.mark.parametrize("backbone", ["scgpt", "scbert", "methylgpt"])
def test_backbone_with_rank_value_trains_one_step(rank_value_registered, backbone):
    x = _data()
    model = _model(backbone=backbone).train()
    model.fit_data(x.numpy())
    model.pe.fit_data(x.numpy())  # ScGPT/ScBERT override fit_data; until they call super()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tok = model.tokenize(x)
    hide = torch.zeros_like(tok.idx, dtype=torch.bool)
    hide[:, 0] = True
    out = model(tok, hide=hide)
    loss = out[:, 0].pow(2).mean()
    loss.backward()
    assert model.pe.table.grad is not None and float(model.pe.table.grad.abs().sum()) > 0
    before = model.pe.table.detach().clone()
    opt.step()
    assert not torch.equal(before, model.pe.table)
    assert torch.isfinite(out).all()


def test_other_pes_unchanged_by_the_value_hook():
    """The backbone passes values only to PEs with ``needs_values``: other PEs' outputs equal
    a forward that calls ``pe.embed(h, idx)`` directly (recorded against the old code path)."""
    x = _data()
    for pe in ["trainable-absolute", "trainable-relative", "learned-small-norm", "none"]:
        torch.manual_seed(0)
        model = build_backbone("scgpt", {"d_model": D, "n_heads": H, "n_layers": 2}, n_features=M, pe=pe).eval()
        assert not getattr(model.pe, "needs_values", False)
        calls = []
        orig = model.pe.embed

        def spy(h, idx, *a, calls=calls, orig=orig, **k):
            calls.append((a, k))
            return orig(h, idx, *a, **k)

        model.pe.embed = spy
        with torch.no_grad():
            model(model.tokenize(x))
        assert calls == [((), {})]
