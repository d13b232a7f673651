"""Data-parallel training over several processes (``torchrun``), the collective of torch DDP.

A base-layer module (torch only): the transformers' loop
(:func:`cape_pipeline.models.training.train_epochs`) and Step I's low-rank solver
(:func:`cape_pipeline.causal.solver.fit_low_rank_vae`) both use it.

Launched by ``torchrun --nproc_per_node=K …`` (which sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` and the rendezvous address), :func:`init_from_env` opens the process group:
``nccl`` when the process's device is a GPU, ``gloo`` on CPUs. Then
:func:`~cape_pipeline.models.training.train_epochs` splits every mini-batch across the ranks:

* every rank holds the same model (rank 0's initial weights are broadcast) and draws the same
  batch order, masks and control cells (the generators are seeded alike and consume the same
  numbers), so the *global* batch is the one a single process would draw;
* rank r evaluates the rows ``r, r + K, r + 2K, …`` of it (:func:`shard`);
* the gradients are summed over the ranks in one flat all-reduce (what
  :class:`torch.nn.parallel.DistributedDataParallel` does per bucket), each rank's weighted by
  its share of the loss's denominator (rows, or hidden tokens for masked pretraining), so the
  update equals the single-process update on the whole batch up to float rounding.

With dropout the ranks draw different dropout masks than one process would; the runs then agree
in distribution only. With dropout 0 they agree to float tolerance
(``tests/models/test_distributed.py``: 2 processes vs 1).
"""

from __future__ import annotations

import logging
import os

import torch
from torch import nn

__all__ = ["world", "init_from_env", "local_device", "shard", "broadcast_parameters", "allreduce_gradients"]


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialized default process group, else ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_device(device: str) -> str:
    """The device of this rank: ``cuda`` / ``auto`` with a GPU becomes ``cuda:LOCAL_RANK`` under
    ``torchrun``; anything else is returned unchanged."""
    local = os.environ.get("LOCAL_RANK")
    if local is not None and device in ("cuda", "auto") and torch.cuda.is_available():
        return f"cuda:{int(local)}"
    return device


def init_from_env(device: str = "cpu") -> str:
    """Open the default process group from ``torchrun``'s environment and return this rank's device
    (nothing is opened unless ``WORLD_SIZE`` > 1).

    Parameters
    ----------
    device
        The requested device; :func:`local_device` maps ``cuda`` / ``auto`` to
        ``cuda:LOCAL_RANK`` under ``torchrun``. A ``cuda…`` result picks the ``nccl`` backend,
        anything else ``gloo``.

    Returns
    -------
    str
        :func:`local_device` of ``device`` (``device`` itself outside ``torchrun``).

    Raises
    ------
    RuntimeError
        From :func:`torch.distributed.init_process_group` (e.g. an unreachable rendezvous).
    """
    import torch.distributed as dist

    device = local_device(device)
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or not dist.is_available() or dist.is_initialized():
        return device
    backend = "nccl" if str(device).startswith("cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(backend=backend)
    if dist.get_rank() == 0:
        logging.getLogger(__name__).warning(
            "data-parallel training over %d ranks (%s backend)", dist.get_world_size(), backend
        )
    return device


def shard(n: int, rank: int, size: int) -> torch.Tensor:
    """Row positions ``rank, rank + size, …`` of a batch of ``n`` rows: ``(⌈(n − rank)/size⌉,)``
    long."""
    return torch.arange(rank, n, size)


def broadcast_parameters(modules: list[nn.Module]) -> None:
    """Copy rank 0's parameters and buffers to every rank (in place)."""
    import torch.distributed as dist

    with torch.no_grad():
        for m in modules:
            for t in [*m.parameters(), *m.buffers()]:
                dist.broadcast(t.data, src=0)


def allreduce_gradients(params: list[nn.Parameter], weight: float, loss_sum: float) -> tuple[float, float]:
    """Turn each rank's gradients of ``weight · loss_r`` into the gradient of the global mean.

    Sums the gradients, the weights and the weighted losses over the ranks in one flat
    all-reduce and divides the gradients by the total weight; a parameter without a gradient on
    some rank counts as zeros there, so every rank takes part in the same collective.

    Parameters
    ----------
    params
        The optimized parameters (same order on every rank).
    weight
        This rank's share of the loss's denominator (rows or tokens; may be 0).
    loss_sum
        ``weight · loss_r`` of this rank (for the log).

    Returns
    -------
    total_weight, mean_loss
        The weight summed over the ranks, and the global mean loss.
    """
    import torch.distributed as dist

    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    dev = grads[0].device if grads else torch.device("cpu")
    tail = torch.tensor([weight, loss_sum], dtype=torch.float64, device=dev)
    flat = torch.cat([g.reshape(-1).to(torch.float64) for g in grads] + [tail])
    dist.all_reduce(flat)
    total = float(flat[-2])
    off = 0
    for p, g in zip(params, grads, strict=True):
        k = g.numel()
        p.grad = (flat[off : off + k] / max(total, 1e-30)).view_as(p).to(p.dtype)
        off += k
    return total, float(flat[-1]) / max(total, 1e-30)
