"""Capacity, save → load and alignment of trained models (cape_pipeline.tasks.TrainedModel)."""

from __future__ import annotations

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from cape_pipeline.errors import CapeDataError, CapeFileError
from cape_pipeline.models import ClassifierHead, build_backbone, pool
from cape_pipeline.models.loops import seeded, train_epochs
from cape_pipeline.models.positions import FeaturePositions
from cape_pipeline.tasks import load, run_task, simulate_methylation_age

M = 24


@pytest.mark.parametrize("backbone", ["scgpt", "scbert", "methylgpt"])
def test_backbone_overfits_32_cells(backbone):
    """Random labels on 32 random cells: only memorization reaches 100 % training accuracy."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(32, M, generator=g) * 4
    x[torch.rand(32, M, generator=g) < 0.3] = 0.0
    y = torch.randint(0, 4, (32,), generator=g)
    with seeded(0):
        model = build_backbone(backbone, {"d_model": 32, "n_heads": 2, "n_layers": 2, "dropout": 0.0}, n_features=M, pe="none")
        model.fit_data(x.numpy())
        head = ClassifierHead(32, 4, dropout=0.0)

    def logits() -> torch.Tensor:
        tok = model.tokenize(x)
        return head(pool(model(tok), tok, "cls"))

    log = train_epochs(
        list(model.parameters()) + list(head.parameters()), lambda bi: F.cross_entropy(logits()[bi], y[bi]), 32,
        epochs=200, batch_size=32, lr=3e-3, generator=g, weight_decay=0.0, modules=[model, head],
    )
    with torch.no_grad():
        acc = float((logits().argmax(1) == y).float().mean())
    assert acc == 1.0, (acc, log.losses[-5:])
    assert log.losses[-1] < 0.05


@pytest.fixture(scope="module")
def cells() -> ad.AnnData:
    rng = np.random.default_rng(0)
    labels = np.repeat(["T", "B", "NK"], 40)
    lam = np.full((120, M), 0.5)
    for i, lab in enumerate(["T", "B", "NK"]):
        lam[labels == lab, i * 6 : (i + 1) * 6] = 6.0
    x = np.log1p(rng.poisson(lam)).astype(np.float32)
    obs = pd.DataFrame({"cell_type": labels}, index=[f"c{i}" for i in range(120)])
    return ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(M)]))


CFG = {"pretrain_epochs": 1, "finetune_epochs": 4, "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}}


def _positions() -> FeaturePositions:
    """Random angles, hyperboloid points and a spanning forest for the M genes."""
    rng = np.random.default_rng(0)
    e = rng.uniform(-0.3, 0.3, (M, 8))
    sq = (e**2).sum(1, keepdims=True)
    hyp = np.hstack([(1 + sq) / (1 - sq), 2 * e / (1 - sq)])
    parent = np.where(np.arange(M) % 4 == 0, -1, np.arange(M) - 1)  # chains of 4
    return FeaturePositions(angles=np.pi / 4 * e, hyperboloid=hyp, parent=parent, parent_weight=rng.uniform(0.1, 1, M))


@pytest.mark.parametrize("pe", ["cape", "cape-learned-scale", "static-absolute", "none", "ape-tree", "cape@riemann"])
def test_save_load_gives_identical_predictions(cells, tmp_path, pe):
    pe, _, attention = pe.partition("@")
    angles = _positions()
    cfg = {**CFG, "attention": attention or "dot"}
    res = run_task("annotation", cells, pe=pe, angles=angles, config=cfg, seed=0)
    model = res.model
    path = model.save(tmp_path / "m")
    back = load(path)
    assert back.var_names == list(cells.var_names) and back.classes == model.classes and back.task == "annotation"
    np.testing.assert_array_equal(back.embed(cells), model.embed(cells))
    np.testing.assert_array_equal(back.embed(cells), res.embeddings)
    pred = back.predict(cells)
    test_cells = res.predictions.index
    np.testing.assert_array_equal(pred[cells.obs_names.get_indexer(test_cells)], res.predictions["predicted"].astype(str).to_numpy())
    # aligned by gene name: shuffled columns give the same predictions
    perm = np.random.default_rng(1).permutation(M)
    np.testing.assert_array_equal(back.predict(cells[:, perm].copy()), pred)
    with pytest.raises(CapeFileError, match="exists"):
        model.save(path)
    model.save(path, overwrite=True)


def test_age_model_round_trip(tmp_path):
    adata = simulate_methylation_age(n_samples=60, n_cpgs=12, seed=0)
    res = run_task("age", adata, pe="none", backbone="methylgpt", config=CFG, seed=0)
    back = load(res.model.save(tmp_path / "age"))
    pred = back.predict(adata, missing="nan")
    te = adata.obs_names.get_indexer(res.predictions.index)
    np.testing.assert_allclose(pred[te], res.predictions["predicted"].to_numpy(), rtol=1e-5, atol=1e-4)


def test_alignment_and_bad_files_give_clear_errors(cells, tmp_path):
    res = run_task("annotation", cells, pe="none", config=CFG, seed=0)
    path = res.model.save(tmp_path / "m")
    back = load(path)
    sub = cells[:, 2:].copy()  # lacks g0, g1
    with pytest.raises(CapeDataError, match="lacks 2"):
        back.predict(sub, missing="error")
    assert back.predict(sub).shape == (120,)  # default: absent genes are not expressed
    other = cells.copy()
    other.var_names = [f"x{i}" for i in range(M)]
    with pytest.raises(CapeDataError, match="none of the model"):
        back.embed(other)
    with pytest.raises(CapeDataError, match="var_names"):
        back.embed(np.zeros((2, M)))
    assert back.embed(np.zeros((2, M), dtype=np.float32), var_names=cells.var_names).shape == (2, 16)
    (path / "weights.pt").write_bytes((path / "weights.pt").read_bytes()[:100])
    with pytest.raises(CapeFileError, match="weights.pt"):
        load(path)
    with pytest.raises(CapeFileError, match="missing"):
        load(tmp_path / "nowhere")


def test_load_rejects_bad_configs_and_align_bad_values(cells, tmp_path):
    import json

    res = run_task("annotation", cells, pe="none", config=CFG, seed=0)
    path = res.model.save(tmp_path / "m")
    cfg = json.loads((path / "config.json").read_text())
    bad = tmp_path / "bad"
    res.model.save(bad)
    (bad / "config.json").write_text(json.dumps({**cfg, "var_names": cfg["var_names"][:-1]}))
    with pytest.raises(CapeFileError, match="var_names"):
        load(bad)
    (bad / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(CapeFileError, match="format"):
        load(bad)
    (bad / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "pe"}))
    with pytest.raises(CapeFileError, match="not a valid model config"):
        load(bad)
    back = load(path)
    x = cells.X.copy()
    x[0, 0] = np.inf
    with pytest.raises(CapeDataError, match="inf"):
        back.embed(x, var_names=cells.var_names)
    x[0, 0] = np.nan
    with pytest.raises(CapeDataError, match="NaN"):
        back.embed(x, var_names=cells.var_names)
    with pytest.raises(CapeDataError, match="numeric"):
        back.embed(np.full((2, M), "a"), var_names=cells.var_names)


def test_shared_pretraining_is_checked_against_the_task(cells):
    from cape_pipeline.errors import CapeConfigError
    from cape_pipeline.tasks import AnnotationConfig, pretrain
    from cape_pipeline.tasks._base import dense_x, resolve_config

    angles = np.random.default_rng(0).uniform(-0.7, 0.7, (M, 8))
    cfg = resolve_config(AnnotationConfig, CFG)
    pre = pretrain(dense_x(cells), backbone="scgpt", cfg=cfg, pe="cape", angles=angles, seed=0)
    shared = run_task("annotation", cells, pe="cape", angles=angles, config=CFG, seed=0, pretrained=pre)
    alone = run_task("annotation", cells, pe="cape", angles=angles, config=CFG, seed=0)
    assert shared.metrics == alone.metrics and shared.curves == alone.curves  # sharing changes nothing
    with pytest.raises(CapeConfigError, match="angles"):
        run_task("annotation", cells, pe="cape", angles=angles * 0.5, config=CFG, seed=0, pretrained=pre)
    with pytest.raises(CapeConfigError, match="seed"):
        run_task("annotation", cells, pe="cape", angles=angles, config=CFG, seed=1, pretrained=pre)


def test_coexpression_embedding_large_m_path_matches_exact(monkeypatch):
    from cape_pipeline.models import pe

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8)) @ rng.normal(size=(8, 50)) + 0.3 * rng.normal(size=(300, 50))
    exact = pe.coexpression_embedding(x, 8)
    monkeypatch.setattr(pe, "COEXPRESSION_EXACT_MAX", 10)
    approx = pe.coexpression_embedding(x, 8)
    np.testing.assert_allclose(approx, exact, atol=1e-4)
