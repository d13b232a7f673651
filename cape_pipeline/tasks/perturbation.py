"""Perturbation-response prediction (paper 000 Supp. E.1; GEARS / scGPT protocol).

Input: a control cell's expression plus a 0/1 flag on the perturbed gene(s) (scGPT's
perturbation tokens). Output: the post-perturbation expression of every gene,
``x_ctrl + Δ(h_token)``. Training pairs each perturbed training cell with a random control
cell (unpaired, as in GEARS), plus control → control pairs. Test perturbations are *unseen*:
``split="conditions"`` (default) holds out a seeded fraction of the single and of the double
conditions; ``split="gears"`` is GEARS's "simulation" split (Roohani et al. 2023, Methods): a
seeded 15 % of the perturbed genes are unseen, every condition touching them is test
(``unseen_single``, ``combo_seen1``, ``combo_seen0``), and 15 % of the doubles whose two genes
were both seen are test too (``combo_seen2``); early stopping holds out ``val_fraction`` of the *training*
conditions (at least one) and scores them the way the test conditions are scored. Metric: MSE between the predicted mean profile (averaged
over control cells) and the true mean of the condition on its top-20 DE genes (largest
|mean change| vs control), averaged over test conditions, separately for single and double
perturbations. ``reference_ctrl_*`` is the "no change" baseline (predict the control mean);
``reference_linear_*`` a linear model on control expression: ridge regression from the
perturbed genes' rows of the control cells' gene–gene correlation (summed for a double) to the
condition's mean shift, fit on the training conditions (skipped above
:data:`LINEAR_REFERENCE_MAX_GENES` genes, where the M × M correlation is too large).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anndata as ad
import numpy as np
import pandas as pd
import torch

from cape_pipeline._keys import CONTROL_LABELS, condition_labels, parse_targets
from cape_pipeline.errors import CapeConfigError, CapeDataError
from cape_pipeline.models import ValueDecoder
from cape_pipeline.models.loops import as_tensor, autocast, seeded
from cape_pipeline.tasks._base import TaskConfig, TaskResult, check_fraction, task_inputs
from cape_pipeline.tasks._fit import TaskRun, finetune, training_stats
from cape_pipeline.tasks.metrics import mse_top_de, top_de_genes

__all__ = [
    "PerturbationConfig",
    "predict_perturbation",
    "split_conditions",
    "split_perturbations",
    "split_unseen_genes",
    "linear_reference",
    "LINEAR_REFERENCE_MAX_GENES",
    "SPLITS",
]

LINEAR_REFERENCE_MAX_GENES = 5000
"""Largest M for which the linear reference (an M × M correlation) is computed."""

SPLITS: tuple[str, ...] = ("conditions", "gears")
"""Test splits of :class:`PerturbationConfig`: unseen conditions, or GEARS's unseen genes."""


def linear_reference(
    x_ctrl: np.ndarray, targets: dict[str, list[int]], shifts: dict[str, np.ndarray], train: list[str], alpha: float = 1.0
) -> dict[str, np.ndarray]:
    """Linear model on control expression: predicted mean shift of every condition.

    Features of a condition: the sum over its perturbed genes g of row g of the Pearson
    correlation of the control cells ``x_ctrl`` (N_ctrl, M); target: its mean shift
    ``mean(x | condition) − mean(x | ctrl)`` (M,). Ridge regression (sklearn, ``alpha``) fit on
    the ``train`` conditions, so unseen genes get a prediction through their co-expression.

    Returns
    -------
    dict
        condition → predicted shift ``(M,)`` for every condition in ``targets``.
    """
    from sklearn.linear_model import Ridge

    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.nan_to_num(np.corrcoef(x_ctrl.T), nan=0.0)
    feats = {c: corr[g].sum(0) for c, g in targets.items()}
    model = Ridge(alpha=alpha).fit(np.stack([feats[c] for c in train]), np.stack([shifts[c] for c in train]))
    return {c: model.predict(f[None])[0] for c, f in feats.items()}


@dataclass(frozen=True)
class PerturbationConfig(TaskConfig):
    """Perturbation protocol and budget.

    Attributes
    ----------
    split
        ``"conditions"``: ``test_fraction`` of the single and (separately) of the double
        conditions are test (a test single's gene may still appear in a training double).
        ``"gears"``: GEARS's simulation split, :func:`split_unseen_genes` (no test single's
        gene is seen in training); metrics are reported per GEARS subgroup as well.
    test_fraction
        ``split="conditions"``: fraction of the single and (separately) of the double
        perturbations held out unseen.
    unseen_gene_fraction, combo_seen2_test_fraction
        ``split="gears"``: fraction of the perturbed genes held out (GEARS: 1 − 0.85), and of
        the doubles with both genes seen (GEARS: 1 − 0.85).
    n_de
        Number of top DE genes scored (GEARS: 20).
    n_eval_ctrl
        Control cells averaged per predicted test profile.
    ctrl_pairs_per_epoch
        Control → control training pairs per epoch, as a fraction of the perturbed pairs.
    """

    finetune_epochs: int = 30
    split: str = "conditions"
    test_fraction: float = 0.3
    unseen_gene_fraction: float = 0.15
    combo_seen2_test_fraction: float = 0.15
    n_de: int = 20
    n_eval_ctrl: int = 256
    ctrl_pairs_per_epoch: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fraction("perturbation.test_fraction", self.test_fraction)
        check_fraction("perturbation.unseen_gene_fraction", self.unseen_gene_fraction)
        check_fraction("perturbation.combo_seen2_test_fraction", self.combo_seen2_test_fraction)
        if self.split not in SPLITS:
            raise CapeConfigError(f"perturbation.split: expected one of {SPLITS}, got {self.split!r}")
        if self.n_de < 1 or self.n_eval_ctrl < 1 or self.ctrl_pairs_per_epoch < 0:
            raise CapeConfigError("perturbation: n_de >= 1, n_eval_ctrl >= 1 and ctrl_pairs_per_epoch >= 0 required")


def split_conditions(conditions: list[str], kinds: list[str], test_fraction: float, seed: int) -> set[str]:
    """Seeded unseen-perturbation split: test conditions, drawn per kind (single/double).

    At least one condition of each kind goes to test when that kind has two or more.
    """
    rng = np.random.default_rng(seed)
    test: set[str] = set()
    for kind in ("single", "double"):
        c = sorted(cond for cond, k in zip(conditions, kinds, strict=True) if k == kind)
        if len(c) < 2:
            continue
        n = min(max(1, int(round(test_fraction * len(c)))), len(c) - 1)
        test.update(np.asarray(c)[rng.choice(len(c), size=n, replace=False)].tolist())
    return test


def split_unseen_genes(
    targets: dict[str, list[int]], unseen_gene_fraction: float, combo_seen2_test_fraction: float, seed: int
) -> dict[str, str]:
    """GEARS's "simulation" split: hold out genes, not only conditions.

    Source: Roohani et al. 2023 (GEARS), Methods, "simulation" split (train genes 85 %,
    ``combo_seen2_train_frac`` 85 %); our implementation of that rule. A seeded
    ``unseen_gene_fraction`` of the perturbed genes (at least one, at most all but one) is
    unseen. A condition is then ``unseen_single`` (a single on an unseen gene), ``combo_seen0`` /
    ``combo_seen1`` (a double with 0 / 1 of its genes seen), ``combo_seen2`` (a double whose two
    genes are seen, drawn with probability ``combo_seen2_test_fraction`` — at least one when there
    are two or more such doubles) or ``train``.

    Parameters
    ----------
    targets
        condition name → perturbed gene indices (one for a single, two for a double).

    Returns
    -------
    dict
        condition → subgroup, one of ``train``, ``unseen_single``, ``combo_seen0``,
        ``combo_seen1``, ``combo_seen2``.

    Raises
    ------
    CapeDataError
        Fewer than two perturbed genes (nothing could be held out and still be trained on).
    """
    rng = np.random.default_rng(seed)
    genes = np.unique(np.concatenate([np.asarray(g, dtype=np.int64) for g in targets.values()]))
    if genes.size < 2:
        raise CapeDataError(f"perturbation.split='gears': need >= 2 perturbed genes, got {genes.size}")
    n_unseen = min(max(1, int(round(unseen_gene_fraction * genes.size))), genes.size - 1)
    unseen = set(rng.choice(genes, size=n_unseen, replace=False).tolist())
    group: dict[str, str] = {}
    seen2: list[str] = []
    for c in sorted(targets):
        n_seen = sum(g not in unseen for g in targets[c])
        if len(targets[c]) == 1:
            group[c] = "train" if n_seen else "unseen_single"
        elif n_seen < len(targets[c]):
            group[c] = f"combo_seen{n_seen}"
        else:
            group[c] = "train"
            seen2.append(c)
    if len(seen2) >= 2:
        n = min(max(1, int(round(combo_seen2_test_fraction * len(seen2)))), len(seen2) - 1)
        group.update((c, "combo_seen2") for c in np.asarray(seen2)[rng.choice(len(seen2), size=n, replace=False)].tolist())
    return group


def split_perturbations(
    conditions: list[str], var_names: Any, config: PerturbationConfig, seed: int
) -> tuple[dict[str, list[int]], dict[str, str]]:
    """The perturbation conditions, their target genes and the test split of one seed.

    The one place the split is drawn: :func:`predict_perturbation` and the pipeline's Step I
    (which leaves the test conditions' cells out, so the graph behind ``cape`` has not seen
    the perturbations it is scored on; :mod:`cape_pipeline.pipeline.stages.discover`) both call it.

    Parameters
    ----------
    conditions
        The distinct labels of the condition column (controls included: labels that name no
        gene, :func:`cape_pipeline._keys.parse_targets`, which reads ``"gA+gB"`` and, where both
        are features, scPerturb's ``"gA_gB"``).
    var_names
        The feature names, ``(M,)`` strings.
    config
        ``split`` and its fractions (:class:`PerturbationConfig`).
    seed
        The run's seed.

    Returns
    -------
    targets
        Perturbation label → target feature indices (one for a single, two for a double), the
        controls left out.
    subgroup
        Perturbation label → ``train`` or its test subgroup (``unseen_single``,
        ``unseen_double``; with ``split="gears"`` ``unseen_single``, ``combo_seen0/1/2``).

    Raises
    ------
    CapeDataError
        A label names a gene that is not among ``var_names``, there are fewer than two
        perturbation labels, or (``split="gears"``) fewer than two perturbed genes.
    """
    gidx = {str(g): i for i, g in enumerate(var_names)}
    parsed = {c: parse_targets(c, gidx) for c in conditions}
    targets: dict[str, list[int]] = {}
    for c in sorted(c for c, genes in parsed.items() if genes):
        bad = [g for g in parsed[c] if g not in gidx]
        if bad:
            raise CapeDataError(f"perturbation: condition {c!r} names genes {bad} not in var_names")
        targets[c] = [gidx[g] for g in parsed[c]]
    if len(targets) < 2:
        raise CapeDataError(f"perturbation: need >= 2 perturbation conditions, got {len(targets)}")
    uniq = sorted(targets)
    kinds = ["single" if len(targets[c]) == 1 else "double" for c in uniq]
    if config.split == "gears":
        return targets, split_unseen_genes(targets, config.unseen_gene_fraction, config.combo_seen2_test_fraction, seed)
    test = split_conditions(uniq, kinds, config.test_fraction, seed)
    return targets, {c: ("train" if c not in test else "unseen_single" if k == "single" else "unseen_double")
                     for c, k in zip(uniq, kinds, strict=True)}


def predict_perturbation(
    adata: ad.AnnData, *, config: PerturbationConfig | None = None, **options: Any
) -> TaskResult:
    """Train on seen perturbations, predict unseen ones; MSE on the top-20 DE genes.

    Parameters
    ----------
    adata
        Expression (n_cells, M), ``obs[label_key or "condition"]`` with control labels
        (``"ctrl"`` or another of :data:`cape_pipeline._keys.CONTROL_LABELS`, as Step I reads them),
        ``"gA+ctrl"`` and ``"gA+gB"`` values (gene names from ``var_names``).
    config
        The protocol and budget (``None``: :class:`PerturbationConfig` defaults).
    **options
        The run's settings (:class:`~cape_pipeline.tasks._fit.TaskRun`): the keywords of
        :func:`~cape_pipeline.tasks.run_task` with its defaults (``label_key`` default
        ``"condition"``). ``pretrained``: a backbone already pretrained with these settings on
        the control and training cells; ``None`` pretrains here.

    Returns
    -------
    TaskResult
        ``metrics``: ``mse_top20`` (all test conditions), ``mse_top20_single``,
        ``mse_top20_double``, ``pearson_delta`` and the ``reference_ctrl_*`` equivalents (with
        ``split="gears"`` also ``*_combo_seen0/1/2``, for the subgroups that have conditions);
        ``predictions``: one row per test condition.

    Raises
    ------
    CapeDataError
        No condition column, cells with a missing or empty label, no control cells, unknown
        perturbed genes, fewer than 2
        perturbations, bad angles.
    TypeError
        An unknown keyword in ``options``.
    """
    t0 = time.perf_counter()
    run = TaskRun(**options)
    pe, seed, device = run.pe, run.seed, run.device
    cfg = config or PerturbationConfig()
    key = run.label_key or "condition"
    if key not in adata.obs.columns:
        raise CapeDataError(f"perturbation: obs has no {key!r} column (expected 'ctrl', 'gA+ctrl', 'gA+gB' values)")
    x, positions = task_inputs(adata, pe, run.angles, cfg.attention)
    cond = condition_labels(adata.obs, key, "perturbation: ")
    # each distinct label's genes, parsed once; controls as Step I reads them (GEARS' "ctrl",
    # "control", "non-targeting", …, any case): labels that name no gene
    features = frozenset(str(g) for g in adata.var_names)
    parsed = {c: parse_targets(c, features) for c in np.unique(cond).tolist()}
    is_ctrl = np.isin(cond, [c for c, genes in parsed.items() if not genes])
    if is_ctrl.sum() < 2:
        raise CapeDataError(
            f"perturbation: need >= 2 control cells (obs[{key!r}] one of {', '.join(CONTROL_LABELS)}; any case), "
            f"got {int(is_ctrl.sum())}"
        )
    targets, subgroup = split_perturbations(np.unique(cond).tolist(), adata.var_names, cfg, seed)
    uniq = sorted(targets)
    test = {c for c, g in subgroup.items() if g != "train"}
    train_conds = [c for c in uniq if c not in test]
    if not train_conds:
        raise CapeDataError(f"perturbation: the {cfg.split!r} split left no training condition; add perturbations or lower the held-out fractions")
    m = adata.n_vars
    flag_table = np.zeros((len(uniq), m), dtype=np.int64)
    cid = {c: i for i, c in enumerate(uniq)}
    for c in uniq:
        flag_table[cid[c], targets[c]] = 1
    tr_rows = np.flatnonzero(np.isin(cond, train_conds))
    ctrl_rows = np.flatnonzero(is_ctrl)
    val_conds: list[str] = []
    if cfg.val_fraction > 0 and len(train_conds) >= 3:
        n_val = min(max(1, int(round(cfg.val_fraction * len(train_conds)))), len(train_conds) - 1)
        val_conds = sorted(np.random.default_rng(seed + 7919).choice(train_conds, size=n_val, replace=False).tolist())
    fit_rows = np.flatnonzero(np.isin(cond, [c for c in train_conds if c not in val_conds]))
    xt = as_tensor(x, device)
    flags_t = torch.as_tensor(flag_table, device=device)
    row_cid = torch.as_tensor([cid.get(c, -1) for c in cond], device=device)
    ctrl_t = torch.as_tensor(ctrl_rows, device=device)
    n_ctrl_pairs = int(round(cfg.ctrl_pairs_per_epoch * fit_rows.size))
    rows_seen = np.concatenate([ctrl_rows, tr_rows])
    overrides = {"perturbation_flags": True, "tokens": "all", "max_tokens": 0}
    pre = run.pretrain(x[rows_seen], cfg, positions, adata.var_names, overrides)
    model = pre.model
    gen = torch.Generator().manual_seed(seed + 1)
    rng = np.random.default_rng(seed)
    ev = rng.choice(ctrl_rows, size=min(cfg.n_eval_ctrl, ctrl_rows.size), replace=False)
    ev_t = torch.as_tensor(ev, device=device)
    ctrl_mean = x[ctrl_rows].mean(0)
    with seeded(seed + 1):
        head = ValueDecoder(model.config.d_model).to(device)
        n_pert = fit_rows.size
        ex_t = torch.as_tensor(fit_rows, device=device)

        def forward(x_in: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
            tok = model.tokenize(x_in)  # all genes, in order (tokens="all", no cap)
            return x_in + head(model(tok, flags=flags)[:, 1:])  # (B, M)

        def step(bi: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
            bi = bi.to(ctrl_t.device)  # shuffled_batches draws on the CPU
            is_pert = bi < n_pert
            tgt_rows = torch.where(is_pert, ex_t[bi.clamp(max=n_pert - 1)], ctrl_t[torch.randint(ctrl_t.numel(), bi.shape, generator=gen).to(ctrl_t.device)])
            src = ctrl_t[torch.randint(ctrl_t.numel(), bi.shape, generator=gen).to(ctrl_t.device)]
            fl = torch.where(is_pert[:, None], flags_t[row_cid[tgt_rows].clamp(min=0)], torch.zeros_like(flags_t[:1]))
            if rows is not None:  # data parallel: the draws above are the whole batch's; this rank's rows
                src, tgt_rows, fl = src[rows], tgt_rows[rows], fl[rows]
            return ((forward(xt[src], fl) - xt[tgt_rows]) ** 2).mean()

        def mean_profile(c: str) -> np.ndarray:
            fl = flags_t[cid[c]].expand(ev.size, m)
            return forward(xt[ev_t], fl).float().mean(0).cpu().numpy()

        def validate() -> float:
            errs = []
            for c in val_conds:
                truth = x[cond == c].mean(0)
                errs.append(mse_top_de(mean_profile(c), truth, top_de_genes(truth, ctrl_mean, cfg.n_de)))
            return -float(np.mean(errs))

        flog = finetune(
            model, head, step, n_pert + n_ctrl_pairs, cfg=cfg, generator=gen,
            validate=validate if val_conds else None, progress=run.progress, desc=f"perturb {pe} seed {seed}",
        )
        lin = None
        if m <= LINEAR_REFERENCE_MAX_GENES:
            shifts = {c: x[cond == c].mean(0) - ctrl_mean for c in train_conds}
            lin = linear_reference(x[ctrl_rows], {c: targets[c] for c in uniq}, shifts, train_conds)
        rows = []
        with torch.no_grad(), autocast(cfg.precision, device):
            for c in sorted(test):  # one batch per test condition (a handful of conditions)
                pred = mean_profile(c)
                truth = x[cond == c].mean(0)
                de = top_de_genes(truth, ctrl_mean, cfg.n_de)
                dp, dt = pred - ctrl_mean, truth - ctrl_mean
                r = float(np.corrcoef(dp[de], dt[de])[0, 1]) if dp[de].std() > 0 and dt[de].std() > 0 else np.nan
                rows.append({
                    "condition": c, "kind": "single" if len(targets[c]) == 1 else "double", "subgroup": subgroup[c],
                    "mse_top_de": mse_top_de(pred, truth, de), "reference_ctrl_mse_top_de": mse_top_de(ctrl_mean, truth, de),
                    "reference_linear_mse_top_de": mse_top_de(ctrl_mean + lin[c], truth, de) if lin else np.nan,
                    "pearson_delta_top_de": r, "n_cells": int((cond == c).sum()),
                })
    df = pd.DataFrame(rows).set_index("condition")
    metrics: dict[str, float] = {}
    groups = [("", df), ("_single", df[df.kind == "single"]), ("_double", df[df.kind == "double"])]
    if cfg.split == "gears":
        groups += [(f"_{g}", df[df.subgroup == g]) for g in ("combo_seen0", "combo_seen1", "combo_seen2")]
    for suffix, sub in groups:
        if len(sub):
            metrics[f"mse_top{cfg.n_de}{suffix}"] = float(sub.mse_top_de.mean())
            metrics[f"pearson_delta{suffix}"] = float(sub.pearson_delta_top_de.mean())
            metrics[f"reference_ctrl_mse_top{cfg.n_de}{suffix}"] = float(sub.reference_ctrl_mse_top_de.mean())
            if lin is not None:
                metrics[f"reference_linear_mse_top{cfg.n_de}{suffix}"] = float(sub.reference_linear_mse_top_de.mean())
    params = run.params(
        "perturbation", label_key=key, cfg=cfg, model=model, flog=flog,
        train_conditions=train_conds, val_conditions=val_conds, test_conditions=sorted(test),
    )
    return TaskResult(
        task="perturbation",
        metrics=metrics,
        seconds=time.perf_counter() - t0,
        **training_stats(pre.log, flog),
        predictions=df,
        params=params,
    )
