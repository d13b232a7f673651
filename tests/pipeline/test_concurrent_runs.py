"""Several runs on one node: each process's default threads, and one computation per stage key.

The thread count comes from the environment (``OMP_NUM_THREADS``, ``SLURM_CPUS_PER_TASK``), the
affinity mask and the cgroup quota; a run that finds another computing the same stage key waits
for it and reuses its artifact; a holder killed with SIGKILL does not block the next run.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cape_pipeline._threads import cgroup_cpu_quota, cpu_share
from cape_pipeline.pipeline.cache import ArtifactCache
from cape_pipeline.pipeline.runner import run_pipeline

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs fork and SIGKILL")


# ---------------------------------------------------------------------------- thread resolution
def test_affinity_mask_alone():
    assert cpu_share({}, affinity=6, quota=None) == (6, "6 CPUs in the affinity mask")
    assert cpu_share({}, affinity=1, quota=None)[0] == 1


def test_omp_num_threads_and_slurm_narrow_the_share():
    assert cpu_share({"OMP_NUM_THREADS": "3"}, affinity=8, quota=None) == (3, "OMP_NUM_THREADS=3")
    assert cpu_share({"SLURM_CPUS_PER_TASK": "2"}, affinity=8, quota=None) == (2, "SLURM_CPUS_PER_TASK=2")
    both = {"OMP_NUM_THREADS": "4", "SLURM_CPUS_PER_TASK": "2"}
    assert cpu_share(both, affinity=8, quota=None)[0] == 2
    assert cpu_share({"OMP_NUM_THREADS": "4,2"}, affinity=8, quota=None)[0] == 4  # nested list: outer level
    # a share never exceeds the CPUs the process may run on
    assert cpu_share({"OMP_NUM_THREADS": "16"}, affinity=2, quota=None)[0] == 2


@pytest.mark.parametrize("bad", ["", "0", "-1", "two", " "])
def test_values_that_are_not_positive_integers_are_skipped(bad):
    assert cpu_share({"OMP_NUM_THREADS": bad, "SLURM_CPUS_PER_TASK": bad}, affinity=5, quota=None)[0] == 5


def test_cgroup_quota(tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(v2) == 2  # 1.5 CPUs, rounded up
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(v2) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(v1) == 3
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(v1) is None
    assert cgroup_cpu_quota(tmp_path / "absent") is None
    assert cpu_share({}, affinity=8, quota=3) == (3, "cgroup CPU quota 3")


def test_the_affinity_mask_of_a_real_process_is_read():
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no affinity call on this platform")
    code = "from cape_pipeline._threads import cpu_share; print(cpu_share({}, quota=None)[0])"
    cpu = sorted(os.sched_getaffinity(0))[0]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK")}
    out = subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0 and "taskset" in out.stderr:
        pytest.skip("taskset not available")
    assert out.stdout.strip() == "1"


def test_cli_sets_torch_threads_from_the_environment(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SLURM_CPUS_PER_TASK", None)
    cape = Path(sys.executable).with_name("cape")
    out = subprocess.run([str(cape), "run", "krumsiek11", "--workdir", str(tmp_path / "w"), "--dry-run", "-v"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "torch threads 1 (OMP_NUM_THREADS=1)" in out.stderr + out.stdout
    out = subprocess.run([str(cape), "run", "krumsiek11", "--workdir", str(tmp_path / "w"), "--dry-run", "-v",
                          "--threads", "2"], capture_output=True, text=True, env=env)
    assert "torch threads 2 (--threads)" in out.stderr + out.stdout


# ---------------------------------------------------------------------------- one computation per key
_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from cape_pipeline.pipeline.cache import ArtifactCache
    root, stage, key, mode = sys.argv[1:5]
    cache = ArtifactCache(root)
    with cache.computing(stage, key) as hit:
        assert hit is None
        Path(root, "holding").write_text("1")
        if mode == "store":
            time.sleep(2.0)
            cache.store(stage, key, lambda d: (d / "x.txt").write_text("from the holder"), {"summary": {}})
        else:  # hang until killed
            time.sleep(600)
    """
)


def _start_holder(root: Path, stage: str, key: str, mode: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root), stage, key, mode])
    t0 = time.time()
    while not (root / "holding").exists():
        assert p.poll() is None, "the holder process ended before taking the lock"
        assert time.time() - t0 < 60, "the holder never took the lock"
        time.sleep(0.05)
    return p


def test_a_second_run_waits_for_the_first_and_reuses_its_artifact(tmp_path, caplog):
    cache = ArtifactCache(tmp_path)
    key = "ab" * 16
    holder = _start_holder(tmp_path, "discover", key, "store")
    with caplog.at_level(logging.INFO, logger="cape_pipeline.pipeline.cache"):
        with cache.computing("discover", key) as hit:
            assert hit is not None and (hit / "x.txt").read_text() == "from the holder"
    assert holder.wait(30) == 0
    assert any("waiting for another run computing discover" in r.getMessage() for r in caplog.records)


@pytest.fixture
def ingest_holder(tmp_path):
    """``(workdir, key, holder)``: a process holding the compute lock of the ingest stage of
    `krumsiek11` (its key learned from a run in another workdir) and never storing it; killed
    at teardown if still alive."""
    key = run_pipeline("krumsiek11", until="ingest", workdir=tmp_path / "probe").records[-1].key
    work = tmp_path / "w"
    work.mkdir()
    holder = _start_holder(work, "ingest", key, "hang")
    yield work, key, holder
    if holder.poll() is None:
        holder.kill()
        holder.wait(30)


def test_a_holder_killed_with_sigkill_does_not_block_the_next_run(ingest_holder):
    work, key, holder = ingest_holder
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(30)
    t0 = time.perf_counter()
    res = run_pipeline("krumsiek11", until="ingest", workdir=work)
    assert time.perf_counter() - t0 < 60
    assert not res.records[-1].cached and ArtifactCache(work).lookup("ingest", key) is not None


def test_the_runner_waits_for_a_live_holder_then_computes_when_it_stored_nothing(ingest_holder, caplog):
    import threading

    work, _, holder = ingest_holder
    threading.Timer(1.5, lambda: os.kill(holder.pid, signal.SIGKILL)).start()
    with caplog.at_level(logging.INFO, logger="cape_pipeline.pipeline.cache"):
        res = run_pipeline("krumsiek11", until="ingest", workdir=work)
    assert any("waiting for another run computing ingest" in r.getMessage() for r in caplog.records)
    assert not res.records[-1].cached  # the killed holder stored nothing: computed here


def test_the_cape_command_sets_the_wait_policy_before_torch_loads():
    """GNU OpenMP reads ``OMP_WAIT_POLICY`` once, when torch loads it: ``cape`` must set it
    before anything imports torch, and keep a policy the environment already sets."""
    code = textwrap.dedent(
        """
        import os, sys
        from cape_pipeline.cli import main
        assert "torch" not in sys.modules, "importing the CLI loaded torch"
        main(["datasets"])
        print(os.environ["OMP_WAIT_POLICY"])
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "OMP_WAIT_POLICY": "ACTIVE"})
    assert out.stdout.strip().splitlines()[-1] == "ACTIVE"
