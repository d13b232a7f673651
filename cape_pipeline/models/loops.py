"""The generic training loops: the optimizer loop every transformer trains through
(:func:`train_epochs`), masked-value pretraining (:func:`masked_pretrain`) and encoding
(:func:`cell_embeddings`). The task-level fit that calls them is :mod:`cape_pipeline.tasks._fit`.

All randomness comes from an explicit :class:`torch.Generator` (batch order, masks); model
initialization is seeded by the caller (:func:`seeded`), which restores the global torch RNG
afterwards. Global torch settings (threads, default dtype) are never changed.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from cape_pipeline._utils import shuffled_batches
from cape_pipeline.distributed import (
    broadcast_parameters,
    data_parallel,
    shard,
    weighted_backward,
    world,
)
from cape_pipeline.models.backbones.blocks import TokenTransformer
from cape_pipeline.models.backbones.heads import Pooling, ValueDecoder, pool

__all__ = [
    "TrainLog", "seeded", "train_epochs", "warmup_cosine", "masked_pretrain", "masked_value_loss", "masked_step_seconds",
    "cell_embeddings",
    "as_tensor", "PRECISIONS", "autocast",
]

PRECISIONS: tuple[str, ...] = ("fp32", "bf16")
"""Compute precisions of the forward passes (:func:`autocast`): float32, or bfloat16 autocast."""


@dataclass
class TrainLog:
    """What a training loop did.

    Attributes
    ----------
    losses
        Mean training loss per epoch.
    val_scores
        Validation score per epoch (empty without a validation function).
    best_epoch
        1-based epoch whose weights were kept (the best validation score), or ``None`` when
        there was no validation (the last epoch's weights are kept).
    stopped_early
        Training stopped before ``epochs`` because the validation score had not improved for
        ``patience`` epochs.
    n_seen
        Observations processed (summed over epochs).
    seconds
        Wall time of the loop (validation included).
    """

    losses: list[float] = field(default_factory=list)
    val_scores: list[float] = field(default_factory=list)
    best_epoch: int | None = None
    stopped_early: bool = False
    n_seen: int = 0
    seconds: float = 0.0

    def __iadd__(self, other: TrainLog) -> TrainLog:
        self.n_seen += other.n_seen
        self.seconds += other.seconds
        return self


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG inside the block (model initialization, dropout) and restore it after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def autocast(precision: str, device: str | torch.device) -> contextlib.AbstractContextManager:
    """The context the forward passes run in: ``"fp32"`` none (float32 as the weights),
    ``"bf16"`` ``torch.autocast(device_type, dtype=torch.bfloat16)`` on the device of ``device``
    (CUDA or CPU). Backward passes and optimizer steps belong outside it (the weights and their
    gradients stay float32); the rotary step turns autocast off itself (``encodings/rope.py``).

    Raises
    ------
    ValueError
        ``precision`` not one of :data:`PRECISIONS`.
    """
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    raise ValueError(f"precision: expected one of {PRECISIONS}, got {precision!r}")


def as_tensor(x: np.ndarray, device: str | torch.device = "cpu") -> torch.Tensor:
    """Dense float32 tensor of a (N, M) array (NaN kept)."""
    return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32), device=device)


def warmup_cosine(total_steps: int, warmup: float) -> Callable[[int], float]:
    """LR multiplier: linear warmup over ``warmup · total_steps`` steps, then cosine decay to 0.

    Parameters
    ----------
    total_steps
        Optimizer steps of the whole run (epochs × batches per epoch).
    warmup
        Fraction of the steps spent warming up, in [0, 1).

    Returns
    -------
    Callable
        ``step (0-based) -> multiplier in [0, 1]`` for :class:`torch.optim.lr_scheduler.LambdaLR`.
    """
    n_warm = int(round(warmup * total_steps))

    def f(step: int) -> float:
        if step < n_warm:
            return (step + 1) / n_warm
        rest = max(total_steps - n_warm, 1)
        return 0.5 * (1.0 + math.cos(math.pi * min(step - n_warm, rest) / rest))

    return f


def train_epochs(
    params: list[nn.Parameter],
    step: Callable[[torch.Tensor], torch.Tensor],
    n: int,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    weight_decay: float = 0.01,
    clip: float = 1.0,
    warmup: float = 0.1,
    modules: list[nn.Module] | None = None,
    validate: Callable[[], float] | None = None,
    patience: int | None = None,
    progress: bool = False,
    desc: str = "train",
    max_steps: int | None = None,
    precision: str = "fp32",
) -> TrainLog:
    """Run AdamW with warmup + cosine decay over shuffled mini-batches of ``n`` observations.

    The run is ``epochs`` passes over the data or ``max_steps`` optimizer steps, whichever is
    fewer; the warmup and cosine schedule span that budget, so a large dataset is subsampled
    by its step budget (each observation seen at most once per epoch, in a seeded order) rather
    than trained for the same number of epochs as a small one.

    With ``validate``, the score is computed after every epoch (modules in eval mode, higher is
    better), training stops once it has not improved for ``patience`` epochs, and the weights
    of the best epoch are restored at the end (the checkpoint with the best validation score).

    Parameters
    ----------
    params
        Parameters to optimize.
    step
        ``step(batch_index (b,) long) -> scalar loss``. Under data parallelism (a process group
        of K > 1 ranks, :mod:`cape_pipeline.distributed`) it is called as ``step(batch_index, rows)``:
        draw everything random for the whole batch, evaluate only its ``rows`` (positions into
        the batch) and return ``(loss, weight)``, the mean loss over those rows and its
        denominator (rows, or scored tokens), or a scalar (weight = ``len(rows)``).
    n
        Number of observations.
    epochs, batch_size, lr, weight_decay
        Optimization settings; ``epochs`` is the most that run (the cosine spans them all).
    generator
        Seeds the batch order.
    clip
        Max gradient norm (0 = no clipping).
    warmup
        Fraction of the steps with linear LR warmup.
    modules
        Put into train mode during the loop, eval mode after; their weights are the ones
        checkpointed and restored.
    validate
        ``() -> score`` (higher is better), or ``None``.
    patience
        Epochs without improvement before stopping (``None`` = never stop early).
    progress
        Show progress: a bar in a terminal, else a line at least every
        ``$CAPE_PROGRESS_INTERVAL`` seconds (30) with steps done, the running loss and the ETA
        (:mod:`cape_pipeline._progress`); also logs the loss per epoch (``logging`` INFO).
    desc
        Name of the run in progress lines and logs.
    max_steps
        Most optimizer steps (``None`` or 0: no cap). Validation still runs at the end of each
        (possibly partial, the last) epoch.
    precision
        ``"fp32"`` or ``"bf16"``: ``step`` (the forward pass and the loss) and ``validate`` run
        under :func:`autocast`; the backward pass, clipping and the optimizer step run outside
        it on the float32 parameters. With ``"fp32"`` nothing changes.

    Returns
    -------
    TrainLog

    Raises
    ------
    ValueError
        ``max_steps`` < 0, or ``precision`` unknown.
    """
    import logging

    from cape_pipeline._progress import progress_task

    log = logging.getLogger(__name__)
    out = TrainLog()
    if max_steps is not None and max_steps < 0:
        raise ValueError(f"train_epochs: max_steps must be >= 0 or None, got {max_steps}")
    if precision not in PRECISIONS:
        raise ValueError(f"train_epochs: precision must be one of {PRECISIONS}, got {precision!r}")
    if epochs <= 0 or n == 0:
        return out
    device = params[0].device if params else "cpu"
    modules = modules or []
    rank, size = world()
    ddp = None
    if size > 1:  # data parallel (torchrun): same start on every rank, batches split by rows
        broadcast_parameters(modules)  # buffers too; DDP then holds the optimized parameters
        ddp = data_parallel(params)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    per_epoch = -(-n // batch_size)
    total = epochs * per_epoch if not max_steps else min(epochs * per_epoch, max_steps)
    epochs = -(-total // per_epoch)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total, warmup))
    best_score, best_state, since_best = -math.inf, None, 0
    t0 = time.perf_counter()
    done = 0
    with progress_task(desc, total, unit="steps", show=progress) as bar:
        for ep in range(epochs):
            for m in modules:
                m.train()
            tot, cnt = 0.0, 0
            for bi in shuffled_batches(n, batch_size, generator):
                if done >= total:
                    break
                done += 1
                opt.zero_grad(set_to_none=True)
                if ddp is not None:
                    loss_value = _distributed_backward(ddp, step, bi, rank, size, autocast(precision, device))
                else:
                    with autocast(precision, device):
                        loss = step(bi)
                    loss = loss[0] if isinstance(loss, tuple) else loss
                    loss.backward()
                    loss_value = float(loss.detach())
                if clip:
                    torch.nn.utils.clip_grad_norm_(params, clip)
                opt.step()
                sched.step()
                tot += loss_value * bi.numel()
                cnt += bi.numel()
                bar.update(advance=1, loss=f"loss {tot / cnt:.4f}", epoch=f"epoch {ep + 1}/{epochs}")
            out.losses.append(tot / max(cnt, 1))
            out.n_seen += cnt
            msg = f"{desc} epoch {ep + 1}/{epochs} loss {out.losses[-1]:.4f}"
            if validate is not None:
                for m in modules:
                    m.eval()
                with torch.no_grad(), autocast(precision, device):
                    score = float(validate())
                out.val_scores.append(score)
                msg += f" val {score:.4f}"
                bar.update(val=f"val {score:.4f}")
                if score > best_score:
                    best_score, since_best, out.best_epoch = score, 0, ep + 1
                    best_state = [copy.deepcopy(m.state_dict()) for m in modules]
                else:
                    since_best += 1
                    if patience is not None and since_best >= patience and ep + 1 < epochs:
                        out.stopped_early = True
                        if progress:
                            log.info(msg + " (early stop)")
                        break
            if progress:
                log.info(msg)
    if best_state is not None:
        for m, sd in zip(modules, best_state, strict=True):
            m.load_state_dict(sd)
    out.seconds = time.perf_counter() - t0
    for m in modules:
        m.eval()
    return out


def _distributed_backward(
    ddp: nn.Module, step: Callable, bi: torch.Tensor, rank: int, size: int, amp: contextlib.AbstractContextManager,
) -> float:
    """One data-parallel step: this rank's rows of the batch through the DDP wrapper (inside
    ``amp``, the forward's :func:`autocast`), then the weighted backward (DDP averages the
    gradients). Returns the global mean loss."""
    rows = shard(bi.numel(), rank, size)
    with amp:
        out = ddp(step, bi, rows)
    loss, weight = out if isinstance(out, tuple) else (out, float(rows.numel()))
    _, mean = weighted_backward(loss, float(weight))
    return mean


def masked_pretrain(
    model: TokenTransformer,
    x: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    mask_ratio: float,
    generator: torch.Generator,
    weight_decay: float = 0.01,
    warmup: float = 0.1,
    progress: bool = False,
    max_steps: int | None = None,
    desc: str = "pretrain",
    precision: str = "fp32",
) -> tuple[ValueDecoder, TrainLog]:
    """Masked value reconstruction (scGPT/scBERT/MethylGPT-style self-supervision).

    Each epoch hides a ``mask_ratio`` fraction of the observed tokens of every observation
    (their value embedding becomes <mask>) and regresses the hidden values from the token
    outputs: MSE over hidden tokens (padding and missing values are never hidden or scored).
    AdamW with warmup + cosine decay, gradient clipping at norm 1 (:func:`train_epochs`).

    Parameters
    ----------
    model
        The backbone.
    x
        ``(N, M)`` float training data (NaN = missing).
    precision
        ``"fp32"`` or ``"bf16"``: the forward passes and the loss under :func:`autocast`
        (:func:`train_epochs`).

    Returns
    -------
    (ValueDecoder, TrainLog)
        The fitted decoder and the log.
    """
    # the decoder takes the backbone's dtype (a float64 model, e.g. for exact comparisons, trains as such)
    dec = ValueDecoder(model.config.d_model).to(device=x.device, dtype=next(model.parameters()).dtype)

    def step(bi: torch.Tensor, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
        return masked_value_loss(model, dec, x[bi], mask_ratio=mask_ratio, generator=generator, rows=rows)

    log = train_epochs(
        list(model.parameters()) + list(dec.parameters()), step, x.shape[0],
        epochs=epochs, batch_size=batch_size, lr=lr, generator=generator,
        weight_decay=weight_decay, warmup=warmup, modules=[model, dec], progress=progress, desc=desc,
        max_steps=max_steps, precision=precision,
    )
    return dec, log


def masked_value_loss(
    model: TokenTransformer,
    dec: ValueDecoder,
    xb: torch.Tensor,
    *,
    mask_ratio: float,
    generator: torch.Generator,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float]:
    """One batch of masked-value reconstruction (the loss of :func:`masked_pretrain`).

    Tokenizes ``xb`` ``(B, M)``, hides each observed token with probability ``mask_ratio``
    (masks drawn for the whole batch from ``generator`` on the CPU), encodes, decodes the token
    outputs and returns the MSE over hidden tokens and their number. With ``rows`` (data
    parallel) only those rows of the batch are evaluated, with the batch's padding width.

    Returns
    -------
    (Tensor, float)
        Scalar loss (0 with a gradient path when nothing is hidden) and the hidden-token count.
    """
    tok = model.tokenize(xb)
    r = torch.rand(tok.idx.shape, generator=generator).to(xb.device)  # the whole batch's masks
    hide = (r < mask_ratio) & tok.observed
    if rows is not None:  # data parallel: this rank's rows (same padding width as the batch)
        rows = rows.to(xb.device)
        tok, hide = tok.select(rows), hide[rows]
    h = model(tok, hide=hide)  # (B, 1+T, D)
    pred = dec(h[:, 1:])  # (B, T)
    n_hidden = int(hide.sum())
    if not n_hidden:
        return pred.sum() * 0.0, 0.0
    return ((pred - torch.nan_to_num(tok.values)) ** 2)[hide].mean(), float(n_hidden)


def masked_step_seconds(
    model: TokenTransformer,
    xb: torch.Tensor,
    *,
    steps: int = 3,
    warmup_steps: int = 1,
    mask_ratio: float = 0.4,
    generator: torch.Generator,
    lr: float = 1e-4,
) -> float:
    """Seconds per masked-value pretraining step of ``model`` on one batch, timed through
    :func:`train_epochs` (the loop every pretraining runs: forward, loss, backward, clipping,
    AdamW and the schedule).

    ``warmup_steps + steps`` steps run on ``xb`` (every step the same rows, in a shuffled
    order); the ``warmup_steps`` first are not timed, and the median of the others is
    returned. On CUDA every step is timed to its synchronisation. The model's weights change:
    give it a throwaway copy.

    Parameters
    ----------
    model
        The backbone, on the device of ``xb``.
    xb
        ``(B, M)`` float batch (NaN = missing).
    steps, warmup_steps
        Timed steps (≥ 1) and untimed steps before them (≥ 0).
    mask_ratio
        Share of tokens hidden per step.
    generator
        Seeds the row order and the masks.
    lr
        Peak AdamW learning rate.

    Returns
    -------
    float
        The median seconds per step.

    Raises
    ------
    ValueError
        ``steps`` < 1, ``warmup_steps`` < 0 or an empty batch.
    """
    if steps < 1 or warmup_steps < 0 or xb.shape[0] < 1:
        raise ValueError(f"masked_step_seconds: expected steps >= 1, warmup_steps >= 0 and a non-empty batch, got "
                         f"steps={steps}, warmup_steps={warmup_steps}, {xb.shape[0]} rows")
    dec = ValueDecoder(model.config.d_model).to(device=xb.device, dtype=next(model.parameters()).dtype)
    on_cuda = xb.device.type == "cuda"
    starts: list[float] = []

    def step(bi: torch.Tensor, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
        if on_cuda:  # the previous step's kernels end before its time does
            torch.cuda.synchronize(xb.device)
        starts.append(time.perf_counter())
        return masked_value_loss(model, dec, xb[bi], mask_ratio=mask_ratio, generator=generator, rows=rows)

    n = xb.shape[0]
    train_epochs(list(model.parameters()) + list(dec.parameters()), step, n, epochs=warmup_steps + steps,
                 batch_size=n, lr=lr, generator=generator, modules=[model, dec])
    if on_cuda:
        torch.cuda.synchronize(xb.device)
    starts.append(time.perf_counter())
    return float(np.median(np.diff(starts)[warmup_steps:]))


@torch.no_grad()
def cell_embeddings(model: TokenTransformer, x: torch.Tensor, *, pooling: Pooling = "cls", batch_size: int = 128) -> np.ndarray:
    """Cell embeddings of ``x`` (N, M) in eval mode → ``(N, D)`` float32 numpy."""
    model.eval()
    out = []
    for s in range(0, x.shape[0], batch_size):
        tok = model.tokenize(x[s : s + batch_size])
        out.append(pool(model(tok), tok, pooling).float().cpu())
    if not out:
        return np.zeros((0, model.config.d_model), dtype=np.float32)
    return torch.cat(out).numpy()
