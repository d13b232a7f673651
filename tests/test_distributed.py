"""Data-parallel training (cape_pipeline.distributed): 2 gloo processes on the CPU give the
same model and metrics as 1 process with the same seed and the same (global) batch.

Tolerances. On 2 ranks every batch sum (batch statistics, gradients) is formed in another order
than on 1, so each step differs by rounding, O(n·ε) relative for a sum of n terms. Adam turns a
gradient that is exactly 0 into a step of size ~lr·noise/(noise + eps): in float32 (noise ~1e-10,
eps 1e-8) that is ~1 % of lr per step, which over ~100 steps is a difference of the order of the
weights themselves, on one processor more than another (2.2e-4 was seen on an Intel Xeon against
atol 2e-4). The weight comparisons therefore run in float64, where ε = 1.1e-16: a batch sum of
n ≤ 128 terms is exact to n·ε ≈ 1.4e-14, the zero-gradient steps are ~lr·1e-16/1e-8 = 1e-8·lr, and
over the S ≤ 200 steps of a fit the difference can grow by at most the steps' own Lipschitz
factor. We allow WEIGHT_TOL = 1e-9 (absolute, weights of order 0.01–1): 10⁵ × the per-step
rounding, so 5 decades of amplification, while a wrong all-reduce (a missing or doubled rank)
moves weights by ≥ 1e-3.
"""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from cape_pipeline.distributed import local_device, shard, world
from cape_pipeline.errors import CapeConfigError
from cape_pipeline.models import build_backbone
from cape_pipeline.models.loops import masked_pretrain, seeded
from cape_pipeline.tasks import run_task, simulate_perturbation_data

#: see the module docstring: float64 rounding, amplified by ≤ 10⁵ over the fit
WEIGHT_TOL = 1e-9
CFG = {"d_model": 16, "n_heads": 2, "n_layers": 1, "dropout": 0.0, "attn_dropout": 0.0}
PERT = {"pretrain_epochs": 2, "finetune_epochs": 3, "batch_size": 16, "model": CFG}


def _data() -> np.ndarray:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(40, 12, generator=g) * 3
    x[torch.rand(40, 12, generator=g) < 0.3] = 0.0
    return x.numpy()


def _pretrain() -> dict[str, torch.Tensor]:
    """Masked-value pretraining of a small scGPT (batch 16 over 40 cells: one uneven batch), in
    float64: the test is about the data-parallel algorithm, not float32 rounding (see
    test_two_processes_pretrain_the_same_model_as_one)."""
    x = torch.as_tensor(_data()).double()
    with seeded(0):
        model = build_backbone("scgpt", {**CFG, "max_tokens": 8}, n_features=12, pe="none").double()
        model.fit_data(x.numpy())
        _, log = masked_pretrain(
            model, x, epochs=3, batch_size=16, lr=3e-3, mask_ratio=0.4, generator=torch.Generator().manual_seed(1)
        )
    return {"losses": torch.tensor(log.losses, dtype=torch.float64), **{k: v.detach().clone() for k, v in model.state_dict().items()}}


def _perturbation() -> dict[str, float]:
    adata = simulate_perturbation_data(n_genes=12, n_single=4, n_double=2, n_ctrl=60, cells_per_condition=6, seed=0)
    res = run_task("perturbation", adata, pe="none", config=PERT, seed=0)
    return {k: float(v) for k, v in res.metrics.items()}


def _step1() -> np.ndarray:
    """Step I (low-rank solver, sampled posterior) on a small SEM, fit in float64: the dense weight
    matrix U Vᵀ. 300 rows at batch 128: the last batch (44 rows) is split too."""
    from cape_pipeline.causal.lowrank import SolverConfig, fit_low_rank_vae

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 8))
    x[:, 1] += x[:, 0]
    x[:, 2] += 0.8 * x[:, 1] - 0.5 * x[:, 0]
    x = (x - x.mean(0)) / x.std(0)
    cfg = SolverConfig(rank=4, epochs=60, max_outer=3, seed=0, posterior="sampled", dtype="float64")
    res = fit_low_rank_vae(torch.from_numpy(x), cfg, device="cpu")
    return res.u @ res.v.T


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
    except BaseException:  # the test shows the worker's traceback instead of waiting for a timeout
        import traceback

        queue.put({"error": f"rank {rank}: {traceback.format_exc()}"})
        raise
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
    assert "error" not in out, out.get("error")
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return out


def test_more_ranks_than_gpus_on_a_node_is_a_clear_error(monkeypatch):
    """torchrun with more ranks per node than GPUs: a one-line error naming --nproc-per-node, not
    CUDA's "invalid device ordinal" from inside a stage (seen on a one-GPU machine)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert local_device("auto") == "cuda:0" and local_device("cpu") == "cpu"
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(CapeConfigError, match=r"LOCAL_RANK=1 has no GPU of its own \(1 CUDA device\).*--nproc-per-node"):
        local_device("cuda")
    assert local_device("cpu") == "cpu"


def test_shard_covers_the_batch_once():
    rows = [shard(7, r, 3) for r in range(3)]
    assert sorted(torch.cat(rows).tolist()) == list(range(7))
    assert rows[0].tolist() == [0, 3, 6]


def test_two_processes_pretrain_the_same_model_as_one(two_ranks):
    torch.set_num_threads(1)
    one = _pretrain()
    two = two_ranks["pretrain"]
    assert one.keys() == two.keys()
    for k in one:
        # the key bias's exact gradient is 0 (it shifts every score of a query alike); in float64
        # Adam's steps from its rounding noise are ~1e-8·lr, inside WEIGHT_TOL like every weight
        torch.testing.assert_close(torch.as_tensor(two[k]), one[k], atol=WEIGHT_TOL, rtol=0, msg=k)
    with seeded(0):  # the weights did move away from the initialization, so the check has teeth
        init = build_backbone("scgpt", {**CFG, "max_tokens": 8}, n_features=12, pe="none").double().state_dict()
    moved = max(float((one[k] - init[k]).abs().max()) for k in init if init[k].is_floating_point())
    assert moved > 1e-2


def test_two_processes_give_the_same_perturbation_metrics(two_ranks):
    torch.set_num_threads(1)
    """The task trains in float32 (run_task has no float64 path): its metrics are means over cells
    and the top-20 genes of predictions whose weights differ between 1 and 2 ranks by float32
    rounding (ε = 6e-8, sums of ≤ 10³ terms: ≤ 1e-4 relative per step, not compounding over the
    ~20 steps because Adam's steps are bounded by lr). Measured on an AMD EPYC: 1.4e-5 relative;
    rel=1e-3 is 10× the per-step bound."""
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
    np.testing.assert_allclose(two, one, atol=WEIGHT_TOL, rtol=0)
