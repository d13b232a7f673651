"""Data-parallel training (cape_pipeline.distributed): 2 gloo processes on the CPU give the
same model and metrics as 1 process with the same seed and the same (global) batch."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from cape_pipeline.distributed import shard, world
from cape_pipeline.models import build_backbone
from cape_pipeline.models.training import masked_pretrain, seeded
from cape_pipeline.tasks import run_task, simulate_perturbation_data

CFG = {"d_model": 16, "n_heads": 2, "n_layers": 1, "dropout": 0.0, "attn_dropout": 0.0}
PERT = {"pretrain_epochs": 2, "finetune_epochs": 3, "batch_size": 16, "model": CFG}


def _data() -> np.ndarray:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(40, 12, generator=g) * 3
    x[torch.rand(40, 12, generator=g) < 0.3] = 0.0
    return x.numpy()


def _pretrain() -> dict[str, torch.Tensor]:
    """Masked-value pretraining of a small scGPT (batch 16 over 40 cells: one uneven batch)."""
    x = torch.as_tensor(_data())
    with seeded(0):
        model = build_backbone("scgpt", {**CFG, "max_tokens": 8}, n_features=12, pe="default")
        model.fit_data(x.numpy())
        _, log = masked_pretrain(
            model, x, epochs=3, batch_size=16, lr=3e-3, mask_ratio=0.4, generator=torch.Generator().manual_seed(1)
        )
    return {"losses": torch.tensor(log.losses), **{k: v.detach().clone() for k, v in model.state_dict().items()}}


def _perturbation() -> dict[str, float]:
    adata = simulate_perturbation_data(n_genes=12, n_single=4, n_double=2, n_ctrl=60, cells_per_condition=6, seed=0)
    res = run_task("perturbation", adata, pe="default", config=PERT, seed=0)
    return {k: float(v) for k, v in res.metrics.items()}


def _step1() -> np.ndarray:
    """Step I (low-rank solver, sampled posterior) on a small SEM: the dense weight matrix. 300 rows
    at batch 128: the last batch (44 rows) is split too."""
    from cape_pipeline.causal.api import discover_scored

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8))
    x[:, 1] += x[:, 0]
    x[:, 2] += 0.8 * x[:, 1] - 0.5 * x[:, 0]
    _, scores = discover_scored(x, epochs=60, max_outer=3, rank=4, seed=0, device="cpu", posterior="sampled")
    return scores


def _worker(rank: int, size: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(size))
    torch.set_num_threads(1)
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=size)
    try:
        assert world() == (rank, size)
        out = {"pretrain": _pretrain(), "perturbation": _perturbation(), "step1": _step1()}
        if rank == 0:  # numpy: torch tensors would travel as shared memory the exiting worker frees
            out["pretrain"] = {k: v.numpy() for k, v in out["pretrain"].items()}
            queue.put(out)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks() -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        out = queue.get(timeout=240)
    finally:
        for p in procs:
            p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return out


def test_shard_covers_the_batch_once():
    rows = [shard(7, r, 3) for r in range(3)]
    assert sorted(torch.cat(rows).tolist()) == list(range(7))
    assert rows[0].tolist() == [0, 3, 6]


def test_two_processes_pretrain_the_same_model_as_one(two_ranks):
    torch.set_num_threads(1)
    one = _pretrain()
    two = two_ranks["pretrain"]
    assert one.keys() == two.keys()
    d = CFG["d_model"]
    for k in one:
        a, b = torch.as_tensor(two[k]), one[k]
        if k.endswith("attn.in_proj.bias"):
            # the key bias shifts every score of a query alike, so softmax ignores it and its exact
            # gradient is 0; AdamW turns the rounding noise of that 0 (~1e-10, a different sum
            # order on 2 ranks) into lr-sized steps. Its drift is bounded by lr·steps, not 1e-5.
            k_bias = slice(d, 2 * d)
            torch.testing.assert_close(a[k_bias], b[k_bias], atol=3e-3 * 9, rtol=0, msg=k)
            a, b = torch.cat([a[:d], a[2 * d :]]), torch.cat([b[:d], b[2 * d :]])
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4, msg=k)
    with seeded(0):  # the weights did move away from the initialization, so the check has teeth
        init = build_backbone("scgpt", {**CFG, "max_tokens": 8}, n_features=12, pe="default").state_dict()
    moved = max(float((one[k] - init[k]).abs().max()) for k in init if init[k].is_floating_point())
    assert moved > 1e-2


def test_two_processes_give_the_same_perturbation_metrics(two_ranks):
    torch.set_num_threads(1)
    one = _perturbation()
    two = two_ranks["perturbation"]
    assert one.keys() == two.keys()
    for k in one:
        assert two[k] == pytest.approx(one[k], rel=1e-3, abs=1e-5), k


def test_two_processes_fit_the_same_step1_weights_as_one(two_ranks):
    """Step I's minibatches split over 2 ranks: batch statistics of f(X) summed over the ranks
    and the posterior noise drawn for the whole batch, so the fit equals one process's."""
    torch.set_num_threads(1)
    one = _step1()
    two = two_ranks["step1"]
    assert np.abs(one).max() > 0.1  # a non-trivial fit
    np.testing.assert_allclose(two, one, atol=2e-4, rtol=1e-3)
