from __future__ import annotations

import math

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.tasks import (
    AnnotationConfig,
    TaskResult,
    run_task,
    simulate_methylation_age,
    simulate_perturbation_data,
)

TINY = {"d_model": 16, "n_heads": 2, "n_layers": 1, "max_tokens": 16}


def _cfg(**kw):
    return {"pretrain_epochs": 1, "finetune_epochs": 2, "model": TINY, **kw}


@pytest.fixture(scope="module")
def cells() -> ad.AnnData:
    """120 cells × 24 genes, 3 cell types with distinct marker genes, sparse log1p counts."""
    rng = np.random.default_rng(0)
    labels = np.repeat(["T", "B", "NK"], 40)
    lam = np.full((120, 24), 0.5)
    for i, lab in enumerate(["T", "B", "NK"]):
        lam[labels == lab, i * 6 : (i + 1) * 6] = 6.0
    x = np.log1p(rng.poisson(lam)).astype(np.float32)
    obs = pd.DataFrame({"cell_type": labels}, index=[f"c{i}" for i in range(120)])
    return ad.AnnData(X=sp.csr_matrix(x), obs=obs, var=pd.DataFrame(index=[f"g{i}" for i in range(24)]))


def _angles(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-math.pi / 4, math.pi / 4, (n, d))


def _finite(res: TaskResult) -> None:
    assert res.metrics and all(math.isfinite(v) for v in res.metrics.values()), res.metrics
    assert res.seconds > 0 and res.cells_per_second > 0


def test_annotation_end_to_end(cells):
    res = run_task("annotation", cells, pe="cape", angles=_angles(cells.n_vars), config=_cfg(finetune_epochs=6), seed=0)
    _finite(res)
    assert {"accuracy", "macro_f1", "reference_accuracy", "reference_macro_f1"} <= set(res.metrics)
    assert res.params["n_test"] == 84 and res.params["n_train"] == 36  # 3:7 split
    assert res.embeddings.shape == (120, 16)
    assert res.confusion.to_numpy().sum() == 84
    assert len(res.curves["finetune_loss"]) == 6
    assert res.metrics["reference_accuracy"] > 0.9


def test_annotation_learns_markers(cells):
    cfg = _cfg(finetune_epochs=30, lr=3e-3, batch_size=16, reference=False)
    res = run_task("annotation", cells, pe="trainable-absolute", config=cfg, seed=0)
    assert res.metrics["accuracy"] > 0.95  # chance is 1/3; the markers separate the types
    assert min(res.curves["finetune_loss"]) < 0.5 * res.curves["finetune_loss"][0]
    assert res.params["best_epoch"] is not None and len(res.curves["val_score"]) == len(res.curves["finetune_loss"])


def test_annotation_is_seeded_and_leaves_global_rng_alone(cells):
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = run_task("annotation", cells, pe="learned-small-norm", config=_cfg(reference=False), seed=3)
    after = torch.rand(1)
    b = run_task("annotation", cells, pe="learned-small-norm", config=_cfg(reference=False), seed=3)
    assert torch.equal(before, after)
    assert a.metrics == b.metrics and a.curves == b.curves
    c = run_task("annotation", cells, pe="learned-small-norm", config=_cfg(reference=False), seed=4)
    assert c.curves != a.curves


def test_annotation_logreg(cells):
    res = run_task("annotation-logreg", cells, seed=0)
    assert res.metrics["accuracy"] > 0.9 and res.task == "annotation-logreg"


def test_clustering_end_to_end(cells):
    res = run_task("clustering", cells, pe="static-absolute", config={"pretrain_epochs": 1, "model": TINY}, seed=0)
    _finite(res)
    assert {"ari", "nmi", "asw", "reference_ari"} <= set(res.metrics)
    assert 0.0 <= res.metrics["asw"] <= 1.0
    assert res.predictions["cluster"].nunique() == 3


def test_perturbation_end_to_end():
    adata = simulate_perturbation_data(n_genes=16, n_single=5, n_double=4, n_ctrl=60, cells_per_condition=10, seed=0)
    res = run_task("perturbation", adata, pe="cape", angles=_angles(16), config=_cfg(n_eval_ctrl=16), seed=0)
    _finite(res)
    assert {"mse_top20_single", "mse_top20_double", "reference_ctrl_mse_top20", "reference_linear_mse_top20"} <= set(res.metrics)
    test = set(res.params["test_conditions"])
    assert test and not test & set(res.params["train_conditions"])  # unseen perturbations
    assert set(res.predictions.index) == test


def test_perturbation_reads_the_control_labels_step1_reads():
    """A screen whose controls are "non-targeting" (or "Control") runs, with the same split and
    metrics as the same screen labelled "ctrl": the task and Step I share one control rule."""
    adata = simulate_perturbation_data(n_genes=16, n_single=5, n_double=4, n_ctrl=60, cells_per_condition=10, seed=0)
    ref = run_task("perturbation", adata, pe="none", config=_cfg(n_eval_ctrl=16), seed=0)
    for label in ("non-targeting", "Control", "NTC"):
        other = adata.copy()
        other.obs["condition"] = other.obs["condition"].astype(str).replace("ctrl", label)
        res = run_task("perturbation", other, pe="none", config=_cfg(n_eval_ctrl=16), seed=0)
        assert res.params["train_conditions"] == ref.params["train_conditions"]
        assert res.metrics == pytest.approx(ref.metrics, rel=1e-9)
    # scPerturb's spelling ("control", "gA", "gA_gB") names the same targets as GEARS' ("gA+ctrl", "gA+gB")
    from cape_pipeline.tasks.perturbation import PerturbationConfig, split_perturbations

    gears = np.unique(adata.obs["condition"].astype(str)).tolist()
    scperturb = [c.replace("+ctrl", "").replace("+", "_") for c in gears]
    a, _ = split_perturbations(gears, adata.var_names, PerturbationConfig(), 0)
    b, _ = split_perturbations(scperturb, adata.var_names, PerturbationConfig(), 0)
    assert sorted(map(tuple, a.values())) == sorted(map(tuple, b.values())) and any(len(t) == 2 for t in b.values())
    # missing metadata is not a control: empty and missing labels are refused, naming the column
    for bad, match in (("", "empty condition label"), (None, "no condition label")):
        other = adata.copy()
        other.obs["condition"] = other.obs["condition"].astype(object)
        other.obs.iloc[0, other.obs.columns.get_loc("condition")] = bad
        with pytest.raises(CapeDataError, match=rf"perturbation: obs\['condition'\]: 1 cells have (an )?{match}"):
            run_task("perturbation", other, pe="none", config=_cfg(n_eval_ctrl=16), seed=0)


def test_gears_split_holds_out_genes():
    """GEARS's simulation split: no gene of an unseen single, seen0 or seen1 double is trained on."""
    from cape_pipeline.tasks.perturbation import split_unseen_genes

    rng = np.random.default_rng(1)
    singles = {f"g{i}+ctrl": [i] for i in range(40)}
    pairs = {f"g{a}+g{b}": [int(a), int(b)] for a, b in {tuple(sorted(rng.choice(40, 2, replace=False))) for _ in range(60)}}
    targets = {**singles, **pairs}
    group = split_unseen_genes(targets, 0.15, 0.15, seed=3)
    assert group == split_unseen_genes(targets, 0.15, 0.15, seed=3)  # seeded
    assert group != split_unseen_genes(targets, 0.15, 0.15, seed=4)
    train_genes = {g for c, gr in group.items() if gr == "train" for g in targets[c]}
    unseen = {targets[c][0] for c, gr in group.items() if gr == "unseen_single"}
    assert len(unseen) == 6 and not unseen & train_genes  # round(0.15 · 40) genes, never trained on
    for c, gr in group.items():
        n_seen = sum(g not in unseen for g in targets[c])
        if len(targets[c]) == 2:
            assert gr in ("train", "combo_seen2") if n_seen == 2 else gr == f"combo_seen{n_seen}"
    n_seen2 = sum(gr == "combo_seen2" for gr in group.values())
    n_both = sum(gr in ("train", "combo_seen2") for c, gr in group.items() if len(targets[c]) == 2)
    assert n_seen2 == max(1, round(0.15 * n_both))
    with pytest.raises(CapeDataError, match="perturbed genes"):
        split_unseen_genes({"g0+ctrl": [0]}, 0.15, 0.15, seed=0)


def test_perturbation_gears_split_end_to_end():
    adata = simulate_perturbation_data(n_genes=16, n_single=8, n_double=10, n_ctrl=60, cells_per_condition=8, seed=0)
    cfg = _cfg(n_eval_ctrl=16, split="gears", unseen_gene_fraction=0.25, combo_seen2_test_fraction=0.3)
    res = run_task("perturbation", adata, pe="none", config=cfg, seed=0)
    _finite(res)
    pred = res.predictions
    assert set(pred.subgroup) <= {"unseen_single", "combo_seen0", "combo_seen1", "combo_seen2"}
    assert (pred.subgroup == "unseen_single").sum() == 2  # round(0.25 · 8) unseen genes
    for g in set(pred.subgroup) - {"unseen_single"}:
        assert res.metrics[f"mse_top20_{g}"] == pytest.approx(pred.mse_top_de[pred.subgroup == g].mean())
    unseen = {c.split("+")[0] for c in pred.index[pred.subgroup == "unseen_single"]}
    trained = {g for c in res.params["train_conditions"] for g in c.split("+")}
    assert not unseen & trained
    with pytest.raises(CapeConfigError, match="perturbation.split"):
        run_task("perturbation", adata, pe="none", config=_cfg(split="genes"), seed=0)


def test_bf16_precision_trains_and_a_bad_precision_is_refused(monkeypatch):
    """``precision="bf16"`` runs the forward passes under bfloat16 autocast (here on the CPU):
    finite losses and metrics; any other value names the key and the choices."""
    import cape_pipeline.models.loops as loops

    dtypes = []

    def spy(precision, device):
        ctx = real(precision, device)
        dtypes.append(getattr(ctx, "fast_dtype", None))
        return ctx

    real = loops.autocast
    monkeypatch.setattr(loops, "autocast", spy)
    adata = simulate_perturbation_data(n_genes=16, n_single=5, n_double=4, n_ctrl=60, cells_per_condition=10, seed=0)
    res = run_task("perturbation", adata, pe="cape", angles=_angles(16), config=_cfg(n_eval_ctrl=16, precision="bf16"), seed=0)
    _finite(res)
    losses = res.curves["pretrain_loss"] + res.curves["finetune_loss"]
    assert losses and all(math.isfinite(v) for v in losses)
    assert res.params["config"]["precision"] == "bf16"
    assert dtypes and set(dtypes) == {torch.bfloat16}  # every training step and validation pass
    with pytest.raises(CapeConfigError, match=r"task\.precision: expected one of 'fp32', 'bf16', got 'fp16'"):
        run_task("perturbation", adata, pe="none", config=_cfg(precision="fp16"))


def test_age_end_to_end_with_missing_values():
    adata = simulate_methylation_age(n_samples=80, n_cpgs=12, seed=0)
    assert np.isnan(adata.X).any()
    for backbone in ("scgpt", "methylgpt"):
        res = run_task("age", adata, pe="cape-input", angles=_angles(12), backbone=backbone, config=_cfg(), seed=0)
        _finite(res)
        assert res.predictions.shape == (24, 2)
        assert res.metrics["medae"] >= 0 and "reference_medae" in res.metrics


def test_bad_inputs_give_clear_errors(cells):
    with pytest.raises(CapeDataError, match="rows"):
        run_task("annotation", cells, pe="cape", angles=_angles(cells.n_vars - 1), config=_cfg())
    with pytest.raises(CapeDataError, match="D/2"):
        run_task("annotation", cells, pe="cape", angles=_angles(cells.n_vars, d=5), config=_cfg())
    with pytest.raises(CapeDataError, match="required"):
        run_task("clustering", cells, pe="cape-additive", config=_cfg())
    with pytest.raises(CapeDataError, match="not in adata.obs"):
        run_task("annotation", cells, pe="none", label_key="celltype_missing", config=_cfg())
    nolab = cells.copy()
    del nolab.obs["cell_type"]
    with pytest.raises(CapeDataError, match="label_key"):
        run_task("clustering", nolab, pe="none", config=_cfg())
    holes = cells.copy()
    holes.obs["cell_type"] = holes.obs["cell_type"].astype(object)
    holes.obs.iloc[0, 0] = None
    with pytest.raises(CapeDataError, match="missing labels"):
        run_task("annotation", holes, pe="none", config=_cfg())
    rare = cells.copy()
    rare.obs["cell_type"] = rare.obs["cell_type"].astype(object)
    rare.obs.iloc[0, 0] = "singleton"
    with pytest.raises(CapeDataError, match="fewer than 2 cells"):
        run_task("annotation", rare, pe="none", config=_cfg())
    with pytest.raises(CapeConfigError, match="task"):
        run_task("imputation", cells)
    with pytest.raises(CapeConfigError, match="unknown field"):
        run_task("annotation", cells, pe="none", config={"epochs": 3})
    with pytest.raises(CapeConfigError, match="test_size"):
        AnnotationConfig(test_size=1.5)
    with pytest.raises(CapeConfigError, match="pe"):
        run_task("annotation", cells, pe="rope", config=_cfg())
    with pytest.raises(CapeDataError, match="condition"):
        run_task("perturbation", cells, pe="none", config=_cfg())
    with pytest.raises(CapeDataError, match="age"):
        run_task("age", cells, pe="none", config=_cfg())
    nan = cells.copy()
    nan.X = nan.X.toarray()
    nan.X[0, 0] = np.nan
    with pytest.raises(CapeDataError, match="NaN"):
        run_task("annotation", nan, pe="none", config=_cfg())


def test_task_functions_take_run_tasks_keywords():
    """The task functions take run_task's keywords (TaskRun's fields) with run_task's defaults,
    and refuse any other keyword."""
    import dataclasses
    import inspect

    from cape_pipeline.tasks._fit import TaskRun
    from cape_pipeline.tasks.age import predict_age

    shared = {
        name: p.default
        for name, p in inspect.signature(run_task).parameters.items()
        if name not in ("task", "adata", "config")
    }
    assert {f.name: f.default for f in dataclasses.fields(TaskRun)} == shared
    with pytest.raises(TypeError, match="lr"):
        predict_age(simulate_methylation_age(n_samples=10, n_cpgs=4, seed=0), lr=1e-3)
