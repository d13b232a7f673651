"""The main job's plan and cost model: what the train stage will do and how long it should take.

Before training, ``cape run`` prints the plan (arms × seeds × tasks, cells, tokens per cell,
width, layers, step budgets) and an estimate of its time from a short calibration on this
machine: a few real training steps of the planned model on a batch of the data
(:func:`calibrate`). ``cape run --dry-run`` stops there (after the cheap ingest and preprocess
stages) and adds a rough estimate for Steps I–III.

The count of work (:func:`plan_train`) follows the tasks' own recipe: one masked-value
pretraining per (arm, seed) shared by annotation and clustering, ``min(pretrain_epochs ·
⌈N/B⌉, pretrain_max_steps)`` steps; fine-tuning at most ``min(finetune_epochs ·
⌈n_fit/B⌉, finetune_max_steps)`` steps (early stopping usually ends it sooner; the
reference models and the clustering are not priced, so the estimate is neither a bound nor
exact: its error against measured stages is in ``benchmarks/scale``); forward passes for
validation and the cell embeddings, priced at a third of a training step per cell (forward ≈
1/3 of forward + backward).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["TrainPlan", "plan_train", "calibrate", "plan_lines", "discover_estimate", "train_plan"]

#: a forward pass per cell costs this share of a training step per cell (backward ≈ 2 × forward)
FORWARD_SHARE = 1.0 / 3.0


@dataclass
class TrainPlan:
    """What the train stage will do on this data.

    Attributes
    ----------
    n_obs, n_vars
        Cells (observations) and features (after preprocessing).
    tasks, arms, seeds
        What is trained: every arm × seed, each on every task.
    d_model, n_layers, n_heads
        Backbone width D, blocks and heads.
    max_tokens
        The cap on feature tokens per cell (the top-``max_tokens`` expressed features; 0 = none).
    tokens_median, tokens_p95
        Tokens per cell after the cap (median and 95th percentile over cells).
    share_capped
        Share of cells with more expressed features than ``max_tokens`` (they keep their highest).
    batch_size
        Cells per step.
    pretrain_steps, pretrain_cells
        Optimizer steps of one pretraining and the cells it sees (``< n_obs · epochs`` when the
        step budget subsamples).
    pretrain_subsampled
        The step budget cut pretraining below its epochs (a seeded subsample of cells per epoch).
    finetune_max_steps
        Most fine-tuning steps per run and task that fine-tunes (early stopping may stop sooner).
    forward_cells
        Cells passed forward only (validation, embeddings) per run, all tasks.
    runs
        Training runs (arms × seeds; a run covers every task).
    step_seconds
        Measured seconds per training step of ``batch_size`` cells (:func:`calibrate`), or NaN.
    step_device
        The torch device the step was measured on (the one the train stage trains on), or None.
    seconds_max
        Estimated train-stage seconds with fine-tuning run to its budget (NaN without
        calibration). Not a bound: early stopping shortens the stage, and the logistic
        regression reference and the clustering, which are not priced, lengthen it; its error
        against measured stages is in ``benchmarks/scale``.
    """

    n_obs: int
    n_vars: int
    tasks: list[str]
    arms: list[str]
    seeds: list[int]
    d_model: int
    n_layers: int
    n_heads: int
    max_tokens: int
    tokens_median: float
    tokens_p95: float
    share_capped: float
    batch_size: int
    pretrain_steps: int
    pretrain_cells: int
    pretrain_subsampled: bool
    finetune_max_steps: int
    forward_cells: int
    runs: int
    step_seconds: float = float("nan")
    seconds_max: float = float("nan")
    step_device: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for the report and ``results.json``)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def _steps(n: int, epochs: int, batch: int, cap: int) -> int:
    full = epochs * -(-n // batch) if n > 0 else 0
    return min(full, cap) if cap else full


def plan_train(
    x: np.ndarray,
    *,
    tasks: list[str],
    arms: list[str],
    seeds: list[int],
    task_cfgs: dict[str, Any],
    model_cfg: Any,
) -> TrainPlan:
    """Count the train stage's work on ``x`` (no training).

    Parameters
    ----------
    x
        ``(N, M)`` float32, the preprocessed data (NaN = missing).
    tasks, arms, seeds
        The tasks, arms and seeds of the run.
    task_cfgs
        ``{task: TaskConfig}`` resolved with the run's overrides.
    model_cfg
        The resolved :class:`~cape_pipeline.models.BackboneConfig`.

    Returns
    -------
    TrainPlan
    """
    n, m = x.shape
    expressed = (np.nan_to_num(x, nan=0.0) != 0).sum(1) if model_cfg.tokens == "expressed" else np.full(n, m)
    cap = int(model_cfg.max_tokens)
    tok = np.minimum(expressed, cap) if cap else expressed
    any_cfg = next(iter(task_cfgs.values())) if task_cfgs else None
    batch = int(any_cfg.batch_size) if any_cfg is not None else 32
    pre_steps = pre_cells = ft_max = fwd = 0
    subsampled = False
    shared = "annotation" in tasks and "clustering" in tasks
    pretrained_once = False
    for task in tasks:
        c = task_cfgs[task]
        n_pre = n
        if task == "annotation" and getattr(c, "pretrain_on", "all") == "train":
            n_pre = int(round(n * (1 - c.test_size)))
        elif task in ("age", "perturbation"):
            n_pre = int(round(n * (1 - getattr(c, "test_size", 0.3))))
        if not (shared and task in ("annotation", "clustering") and pretrained_once):
            s = _steps(n_pre, c.pretrain_epochs, c.batch_size, c.pretrain_max_steps)
            pre_steps += s
            pre_cells += min(s * c.batch_size, c.pretrain_epochs * n_pre)
            subsampled |= bool(c.pretrain_max_steps) and s < c.pretrain_epochs * -(-n_pre // c.batch_size)
            pretrained_once |= task in ("annotation", "clustering")
        if c.finetune_epochs > 0:
            n_train = int(round(n * (1 - getattr(c, "test_size", 0.3))))
            n_val = int(round(n_train * c.val_fraction))
            s = _steps(n_train - n_val, c.finetune_epochs, c.batch_size, c.finetune_max_steps)
            ft_max += s
            epochs_run = -(-s // max(-(-(n_train - n_val) // c.batch_size), 1))
            fwd += n_val * epochs_run
        fwd += n  # the cell embeddings of every task
    return TrainPlan(
        n_obs=int(n), n_vars=int(m), tasks=list(tasks), arms=list(arms), seeds=list(seeds),
        d_model=int(model_cfg.d_model), n_layers=int(model_cfg.n_layers), n_heads=int(model_cfg.n_heads),
        max_tokens=cap, tokens_median=float(np.median(tok)) if n else 0.0,
        tokens_p95=float(np.percentile(tok, 95)) if n else 0.0,
        share_capped=float((expressed > cap).mean()) if cap and n else 0.0,
        batch_size=batch, pretrain_steps=int(pre_steps), pretrain_cells=int(pre_cells),
        pretrain_subsampled=bool(subsampled), finetune_max_steps=int(ft_max), forward_cells=int(fwd),
        runs=len(arms) * len(seeds),
    )


def calibrate(
    model: Any, x: np.ndarray, *, batch_size: int, steps: int = 3, seed: int = 0, mask_ratio: float = 0.4,
    device: str = "cpu",
) -> float:
    """Seconds per training step of ``model`` on batches of ``x``: masked-value pretraining
    steps on a seeded random batch through the tasks' training loop
    (:func:`~cape_pipeline.models.loops.masked_step_seconds`, which runs
    :func:`~cape_pipeline.models.loops.train_epochs`), the median of ``steps`` after one
    warm-up, on ``device`` (on CUDA each step is timed to its synchronisation). The model is a
    throwaway copy the caller builds; it is moved to ``device``.

    A step timed on the host's CPU overestimates a train stage that runs on a GPU several
    times over (``benchmarks/gpu/RESULTS.md``), hence the device.

    Parameters
    ----------
    model
        A :class:`~cape_pipeline.models.backbones.blocks.TokenTransformer` built as the run will build it.
    x
        ``(N, M)`` float32 data.
    batch_size, steps, seed
        Batch size, timed steps and the seed of the batch choice (and of the masks).
    device
        The torch device the train stage trains on.
    mask_ratio
        Share of tokens hidden per step (the task config's ``mask_ratio``).

    Returns
    -------
    float
        Seconds per step.
    """
    import torch

    from cape_pipeline.models.loops import masked_step_seconds

    rng = np.random.default_rng(seed)
    rows = rng.choice(x.shape[0], size=min(batch_size, x.shape[0]), replace=False)
    xb = torch.as_tensor(np.ascontiguousarray(x[rows], dtype=np.float32), device=device)
    model.to(device)
    return masked_step_seconds(model, xb, steps=steps, warmup_steps=1, mask_ratio=mask_ratio,
                               generator=torch.Generator().manual_seed(seed))


def estimate(plan: TrainPlan, step_seconds: float) -> TrainPlan:
    """Fill ``step_seconds`` and ``seconds_max`` of ``plan`` from a measured step time."""
    per_run = (plan.pretrain_steps + plan.finetune_max_steps) * step_seconds
    per_run += plan.forward_cells * step_seconds / plan.batch_size * FORWARD_SHARE
    plan.step_seconds = float(step_seconds)
    plan.seconds_max = float(per_run * plan.runs)
    return plan


def discover_estimate(n_obs: int, n_vars: int, algorithm: str = "learned", n_splits: int = 1) -> float:
    """A rough estimate of Step I's seconds with the ``"learned"`` or ``"regression"`` algorithm
    (NaN for the others) on this kind of 2-core CPU.

    ``"regression"`` (the default for single-cell data): ``n_splits · (REGRESSION_FIXED_S +
    REGRESSION_PER_ENTRY · N · M)``, fitted to ``benchmarks/scale/step1.jsonl`` and
    ``benchmarks/scale/atlas.jsonl`` (Step I alone on simulated counts, M = 2,000 HVGs, 1,000 to
    500,000 cells). Per random split of the cells (``discover.regression.n_splits``) the cost is
    the Gram matrices of the halves, O(N·M²), then work in M alone (the screen's residual
    products, O(M²·k), the regressions and their p-values), which is most of the fixed part.

    ``"learned"``: on this kind of
    2-core CPU, from the main-job runs of ``benchmarks/scale`` (simulated counts, M = 2,000
    HVGs): ``max(210 + 2.5e-6 · N · M, 1.0e-5 · N · M)``.

    Up to N·M ≈ 2.8·10⁷ (14,000 cells at M = 2,000) the fixed part dominates: stage 2 is a
    fixed number of steps. From there on stage 1's passes over the cells take over and the
    time grows about linearly in N (the runs the formula is fitted to, and its error:
    ``benchmarks/scale``). An order of magnitude, not a promise: other data stop early at
    other epochs."""
    nm = float(n_obs) * float(n_vars)
    if algorithm == "regression":
        return max(int(n_splits), 1) * (REGRESSION_FIXED_S + REGRESSION_PER_ENTRY * nm)
    if algorithm != "learned":
        return float("nan")
    return max(210.0 + 2.5e-6 * nm, 1.0e-5 * nm)


#: the regression algorithm's estimate per split of the cells (:func:`discover_estimate`): seconds,
#: and seconds per N·M, fitted to the newest benchmarks/scale/step1.jsonl row of each simulated
#: set and the newest atlas.jsonl CPU row (library size as covariate, counting-noise correction,
#: 8 splits; the rows and the estimate's error: benchmarks/scale/RESULTS.md)
REGRESSION_FIXED_S = 3.5
REGRESSION_PER_ENTRY = 6e-8


def format_clock(seconds: float) -> str:
    """Seconds as ``m:ss`` (``h:mm:ss`` from one hour), ``"?"`` for NaN: the plan's estimates."""
    if not seconds == seconds:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def plan_lines(plan: TrainPlan) -> list[str]:
    """The plan as the lines ``cape run`` prints before training (and ``--dry-run`` alone)."""
    sub = (f", a step budget of {plan.pretrain_steps} steps = {plan.pretrain_cells:,} cells seen "
           f"(subsampled from {plan.n_obs:,} × epochs)" if plan.pretrain_subsampled else f", {plan.pretrain_steps} steps")
    lines = [
        f"train plan: {len(plan.arms)} arms ({', '.join(plan.arms)}) × {len(plan.seeds)} seeds = {plan.runs} runs, "
        f"tasks {', '.join(plan.tasks) or 'none'}",
        f"  data: {plan.n_obs:,} cells × {plan.n_vars:,} features; tokens per cell median {plan.tokens_median:.0f}, "
        f"95th percentile {plan.tokens_p95:.0f} (cap max_tokens={plan.max_tokens or 'none'}: "
        f"{plan.share_capped:.0%} of cells keep only their top {plan.max_tokens} expressed features)",
        f"  model: width D={plan.d_model}, {plan.n_layers} layers, {plan.n_heads} heads, batch {plan.batch_size}",
        f"  per run: pretraining{sub}; fine-tuning at most {plan.finetune_max_steps} steps "
        f"(early stopping usually ends it sooner); {plan.forward_cells:,} cells forward only",
    ]
    if plan.step_seconds == plan.step_seconds:
        device = plan.step_device or "cpu"
        accuracy = ("measured within ±11 % on a quiet machine's CPU, benchmarks/scale" if device == "cpu"
                    else "not yet checked against a measured stage on a GPU")
        lines.append(
            f"  estimate: {plan.step_seconds * 1000:.0f} ms per step measured here ({device}) → about "
            f"{format_clock(plan.seconds_max)} for the train stage ({format_clock(plan.seconds_max / max(plan.runs, 1))} per run; "
            f"fine-tuning to its full budget; {accuracy})"
        )
    lines += [f"  note: {n}" for n in plan.notes]
    return lines


def train_plan(
    adata: Any,
    cfg: Any,
    tasks: list[str],
    arms: list[str],
    settings: dict[str, Any],
    *,
    measure: bool = True,
    x: np.ndarray | None = None,
    device: str = "cpu",
) -> TrainPlan:
    """The train stage's plan on ``adata`` (:func:`plan_train`) and, with ``measure``, its time
    estimate from a few measured training steps of the planned
    model (``pe=cape`` with zero angles: the cost does not depend on their values) on a batch
    of the data, on ``device`` (the estimate is for this machine's CPU or GPU).

    Parameters
    ----------
    adata
        The preprocessed data.
    cfg, tasks, arms
        The train stage's :class:`~cape_pipeline.pipeline.stages.train.TrainConfig`, its resolved
        tasks and arms.
    settings
        The task-config overrides of the run (``task_settings`` of the train stage: width,
        sizes, budget).
    x
        ``dense_x(adata)`` when the caller has it already (the train stage's shared
        pretraining data), so it is not densified twice.
    device
        The torch device the train stage will train on (``"cpu"``, ``"cuda"``, ``"cuda:i"``).

    Returns
    -------
    TrainPlan
    """
    import torch

    from cape_pipeline.models.loops import seeded
    from cape_pipeline.tasks import TASK_CONFIGS
    from cape_pipeline.tasks._base import build_model, dense_x, model_config, resolve_config

    task_cfgs = {t: resolve_config(TASK_CONFIGS[t], settings) for t in tasks}
    base = resolve_config(TASK_CONFIGS["annotation"], settings)
    mcfg = model_config(cfg.backbone, base)
    if x is None:
        x = dense_x(adata, allow_nan="age" in tasks)
    seeds = list(range(cfg.seed, cfg.seed + cfg.n_seeds))
    plan = plan_train(x, tasks=tasks, arms=arms, seeds=seeds, task_cfgs=task_cfgs, model_cfg=mcfg)
    if "perturbation" in tasks:
        plan.notes.append("the perturbation task tokenizes every gene (its own model settings); its cost is not in the estimate")
    if measure and tasks:
        zero = np.zeros((adata.n_vars, mcfg.d_model // 2), dtype=np.float32)
        with seeded(cfg.seed), torch.inference_mode(False):
            model = build_model(cfg.backbone, base, n_features=adata.n_vars, pe="cape", angles=zero, x_train=x[:256])
            estimate(plan, calibrate(model, x, batch_size=base.batch_size, seed=cfg.seed, mask_ratio=base.mask_ratio,
                                     device=device))
            plan.step_device = str(device)
    return plan
