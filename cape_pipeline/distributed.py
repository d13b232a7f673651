"""Data-parallel training over several processes (``torchrun``) with torch's DistributedDataParallel.

A base-layer module (torch only): the transformers' loop
(:func:`cape_pipeline.models.loops.train_epochs`) and Step I's low-rank solver
(:func:`cape_pipeline.causal.lowrank.solver.fit_low_rank_vae`) both use it.

Launched by ``torchrun --nproc_per_node=K …`` (which sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` and the rendezvous address), :func:`init_from_env` opens the process group:
``nccl`` when the process's device is a GPU, ``gloo`` on CPUs. Then
:func:`~cape_pipeline.models.loops.train_epochs` splits every mini-batch across the ranks:

* every rank holds the same model (rank 0's initial weights are broadcast) and draws the same
  batch order, masks and control cells (the generators are seeded alike and consume the same
  numbers), so the *global* batch is the one a single process would draw;
* rank r evaluates the rows ``r, r + K, r + 2K, …`` of it (:func:`shard`);
* the optimized parameters are wrapped in :class:`torch.nn.parallel.DistributedDataParallel`
  (:func:`data_parallel`), which averages their gradients over the ranks in backward; each
  rank's loss is scaled by its share of the loss's denominator (rows, or hidden tokens for
  masked pretraining; :func:`weighted_backward`), so the update equals the single-process
  update on the whole batch up to float rounding.

With dropout the ranks draw different dropout masks than one process would; the runs then agree
in distribution only. With dropout 0 they agree to float tolerance
(``tests/test_distributed.py``: 2 processes vs 1).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from cape_pipeline.errors import CapeConfigError

__all__ = ["world", "init_from_env", "local_device", "shard", "broadcast_parameters", "data_parallel", "weighted_backward"]


def world() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialized default process group, else ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def local_device(device: str) -> str:
    """The device of this rank: ``cuda`` / ``auto`` with a GPU becomes ``cuda:LOCAL_RANK`` under
    ``torchrun``; anything else is returned unchanged.

    Raises
    ------
    CapeConfigError
        ``LOCAL_RANK`` is not below the node's number of CUDA devices (``torchrun
        --nproc-per-node`` larger than the GPUs, which NCCL cannot share between ranks).
    """
    local = os.environ.get("LOCAL_RANK")
    if local is not None and device in ("cuda", "auto") and torch.cuda.is_available():
        n_gpus = torch.cuda.device_count()
        if int(local) >= n_gpus:
            raise CapeConfigError(
                f"torchrun: this node's rank LOCAL_RANK={local} has no GPU of its own ({n_gpus} CUDA "
                f"device{'s' if n_gpus != 1 else ''}); start at most {n_gpus} rank{'s' if n_gpus != 1 else ''} "
                "per node (--nproc-per-node) or train on the CPU (--device cpu)"
            )
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


class _HeldParameters(nn.Module):
    """The parameters one optimizer updates, as one module for
    :class:`torch.nn.parallel.DistributedDataParallel`; its forward runs the caller's closure, so
    whatever the closure computes from those parameters is reduced in backward."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        super().__init__()
        self.held = nn.ParameterList(params)  # the same Parameter objects, not copies

    def forward(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)


def data_parallel(params: list[nn.Parameter]) -> nn.Module:
    """Wrap the optimized parameters in :class:`~torch.nn.parallel.DistributedDataParallel`.

    Construction broadcasts rank 0's values of ``params`` to every rank; then each call
    ``ddp(fn, *args)`` runs ``fn(*args)`` as the forward pass, and the backward of what it returns
    averages the gradients of ``params`` over the ranks (DDP's bucketed all-reduce). A parameter
    without a gradient on some rank counts as zeros there (``find_unused_parameters``). Use
    :func:`weighted_backward` for a global mean whose ranks hold unequal shares. Requires an open
    process group (:func:`init_from_env`).

    Parameters
    ----------
    params
        The optimized parameters, same order and shapes on every rank.

    Returns
    -------
    torch.nn.Module
        The DDP wrapper (call it as described).
    """
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(_HeldParameters(params), find_unused_parameters=True, broadcast_buffers=False)


def weighted_backward(loss: torch.Tensor, weight: float) -> tuple[float, float]:
    """Backward of this rank's mean ``loss`` over its share ``weight`` (rows, or hidden tokens)
    so that, after DDP's average over the K ranks, every gradient is the one of the *global*
    mean: the weights and weighted losses are summed over the ranks first (one float64
    all-reduce) and the loss is scaled by ``K · weight / Σ weight``.

    ``loss`` must come from a forward through :func:`data_parallel`'s wrapper.

    Returns
    -------
    total_weight, mean_loss
        The weight summed over the ranks, and the global mean loss.
    """
    import torch.distributed as dist

    dev = loss.device
    tail = torch.tensor([float(weight), float(loss.detach()) * float(weight)], dtype=torch.float64, device=dev)
    dist.all_reduce(tail)
    total = max(float(tail[0]), 1e-30)
    (loss * (dist.get_world_size() * float(weight) / total)).backward()
    return float(tail[0]), float(tail[1]) / total
