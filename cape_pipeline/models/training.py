"""Training loops shared by the tasks: masked-value pretraining, supervised fine-tuning, encoding.

All randomness comes from an explicit :class:`torch.Generator` (batch order, masks); model
initialization is seeded by the caller (:func:`seeded`), which restores the global torch RNG
afterwards. Global torch settings (threads, default dtype) are never changed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from cape_pipeline.models.blocks import TokenTransformer
from cape_pipeline.models.heads import Pooling, ValueDecoder, pool

__all__ = ["TrainLog", "seeded", "train_epochs", "masked_pretrain", "encode", "as_tensor"]


@dataclass
class TrainLog:
    """What a training loop did.

    Attributes
    ----------
    losses
        Mean loss per epoch.
    n_seen
        Observations processed (summed over epochs).
    seconds
        Wall time of the loop.
    """

    losses: list[float] = field(default_factory=list)
    n_seen: int = 0
    seconds: float = 0.0

    def __iadd__(self, other: TrainLog) -> TrainLog:
        self.n_seen += other.n_seen
        self.seconds += other.seconds
        return self


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed torch's global RNG inside the block (model init, dropout) and restore it after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def as_tensor(x: np.ndarray, device: str | torch.device = "cpu") -> torch.Tensor:
    """Dense float32 tensor of a (N, M) array (NaN kept)."""
    return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32), device=device)


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
    modules: list[nn.Module] | None = None,
    progress: bool = False,
    desc: str = "train",
) -> TrainLog:
    """Run AdamW over shuffled mini-batches of ``n`` observations.

    Parameters
    ----------
    params
        Parameters to optimize.
    step
        ``step(batch_index (b,) long) -> scalar loss``.
    n
        Number of observations.
    epochs, batch_size, lr, weight_decay
        Optimization settings.
    generator
        Seeds the batch order.
    clip
        Max gradient norm.
    modules
        Put into train mode during the loop, eval mode after.
    progress
        Log the loss per epoch (``logging`` INFO).

    Returns
    -------
    TrainLog
    """
    import logging

    log = logging.getLogger(__name__)
    out = TrainLog()
    if epochs <= 0 or n == 0:
        return out
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    for m in modules or []:
        m.train()
    t0 = time.perf_counter()
    for ep in range(epochs):
        order = torch.randperm(n, generator=generator)
        tot, cnt = 0.0, 0
        for s in range(0, n, batch_size):
            bi = order[s : s + batch_size]
            loss = step(bi)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            tot += float(loss.detach()) * bi.numel()
            cnt += bi.numel()
        out.losses.append(tot / max(cnt, 1))
        out.n_seen += cnt
        if progress:
            log.info("%s epoch %d/%d loss %.4f", desc, ep + 1, epochs, out.losses[-1])
    out.seconds = time.perf_counter() - t0
    for m in modules or []:
        m.eval()
    return out


def masked_pretrain(
    model: TokenTransformer,
    x: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    mask_ratio: float,
    generator: torch.Generator,
    progress: bool = False,
) -> tuple[ValueDecoder, TrainLog]:
    """Masked value reconstruction (scGPT/scBERT/MethylGPT-style self-supervision).

    Each epoch hides a ``mask_ratio`` fraction of the observed tokens of every observation
    (their value embedding becomes <mask>) and regresses the hidden values from the token
    outputs: MSE over hidden tokens.

    Parameters
    ----------
    model
        The backbone.
    x
        ``(N, M)`` float training data (NaN = missing).

    Returns
    -------
    (ValueDecoder, TrainLog)
        The fitted decoder and the log.
    """
    dec = ValueDecoder(model.config.d_model).to(x.device)

    def step(bi: torch.Tensor) -> torch.Tensor:
        tok = model.tokenize(x[bi])
        r = torch.rand(tok.idx.shape, generator=generator).to(x.device)
        hide = (r < mask_ratio) & ~tok.missing
        h = model(tok, hide=hide)  # (B, 1+T, D)
        pred = dec(h[:, 1:])  # (B, T)
        if not bool(hide.any()):
            return pred.sum() * 0.0
        return ((pred - torch.nan_to_num(tok.values)) ** 2)[hide].mean()

    log = train_epochs(
        list(model.parameters()) + list(dec.parameters()),
        step,
        x.shape[0],
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        generator=generator,
        modules=[model, dec],
        progress=progress,
        desc="pretrain",
    )
    return dec, log


@torch.no_grad()
def encode(model: TokenTransformer, x: torch.Tensor, *, pooling: Pooling = "cls", batch_size: int = 128) -> np.ndarray:
    """Cell embeddings of ``x`` (N, M) in eval mode → ``(N, D)`` float32 numpy."""
    model.eval()
    out = []
    for s in range(0, x.shape[0], batch_size):
        tok = model.tokenize(x[s : s + batch_size])
        out.append(pool(model(tok), tok, pooling).float().cpu())
    if not out:
        return np.zeros((0, model.config.d_model), dtype=np.float32)
    return torch.cat(out).numpy()
