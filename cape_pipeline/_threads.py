"""The CPU threads a ``cape`` process takes by default: its share of the machine, not all of it.

torch's default intra-op thread count is every core of the machine, whatever the process was
given. Several ``cape`` processes on one node (a SLURM array, Snakemake ``--cores``, a shell loop
with ``&``) then each start that many threads and spin against each other. :func:`cpu_share`
reads what the process was actually given; the ``cape`` command sets torch's thread count to it
unless ``--threads`` says otherwise (the library itself never changes torch's global state).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cpu_share", "cgroup_cpu_quota", "WAIT_POLICY"]

#: OpenMP wait policy the ``cape`` command sets (unless the environment already sets one) before
#: torch loads its OpenMP runtime: idle worker threads sleep instead of spinning, so processes
#: sharing cores do not burn each other's time slices (``benchmarks/scale/concurrent``).
WAIT_POLICY = "PASSIVE"


def _positive_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(str(value).strip().split(",")[0])
    except ValueError:
        return None
    return n if n >= 1 else None


def cgroup_cpu_quota(root: str | os.PathLike[str] = "/sys/fs/cgroup") -> int | None:
    """CPUs allowed by the cgroup's CPU quota, rounded up; ``None`` when there is no quota.

    Reads cgroup v2's ``cpu.max`` (``"<quota> <period>"`` or ``"max <period>"``) or cgroup v1's
    ``cpu/cpu.cfs_quota_us`` and ``cpu/cpu.cfs_period_us`` (quota −1: none) under ``root``.
    A file that cannot be read or parsed counts as no quota.
    """
    root = Path(root)
    try:
        text = (root / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return max(1, math.ceil(int(text[0]) / int(text[1])))
        return None
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return max(1, math.ceil(quota / period)) if quota > 0 and period > 0 else None
    except (OSError, ValueError, ZeroDivisionError):
        return None


def cpu_share(
    environ: Mapping[str, str] | None = None,
    *,
    affinity: int | None = None,
    quota: int | None | bool = True,
) -> tuple[int, str]:
    """The number of CPU threads this process should use, and where the number comes from.

    The smallest of: ``OMP_NUM_THREADS`` (first value of a list), ``SLURM_CPUS_PER_TASK``, the
    CPUs in the process's affinity mask (``os.sched_getaffinity``: ``taskset``, SLURM's and
    Snakemake's pinning, ``docker --cpuset-cpus``) and the cgroup CPU quota (``docker --cpus``,
    Kubernetes limits). Values that are unset or not positive integers are skipped.

    Parameters
    ----------
    environ
        The environment to read (default ``os.environ``).
    affinity
        CPUs in the affinity mask (default: ``len(os.sched_getaffinity(0))``, or
        ``os.cpu_count()`` where the platform has no affinity call).
    quota
        CPUs of the cgroup quota: ``True`` (default) reads it with :func:`cgroup_cpu_quota`;
        ``None``/``False`` means no quota; an int is used as given.

    Returns
    -------
    (int, str)
        Threads ≥ 1 and a short text naming the source, e.g. ``"SLURM_CPUS_PER_TASK=4"``.
    """
    env = os.environ if environ is None else environ
    if affinity is None:
        try:
            affinity = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            affinity = os.cpu_count() or 1
    candidates: list[tuple[int, str]] = [(max(1, int(affinity)), f"{int(affinity)} CPUs in the affinity mask")]
    for name in ("OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"):
        n = _positive_int(env.get(name))
        if n is not None:
            candidates.append((n, f"{name}={n}"))
    q = cgroup_cpu_quota() if quota is True else (quota or None)
    if q:
        candidates.append((int(q), f"cgroup CPU quota {int(q)}"))
    return min(candidates, key=lambda c: c[0])
