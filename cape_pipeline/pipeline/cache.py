"""Content-keyed, atomically written stage artifacts.

Layout: ``<workdir>/<stage>/<key>/`` holds the stage's files (subdirectories allowed) and
``manifest.json`` (parameters, upstream keys, timings, versions, and the size and BLAKE2b
checksum of every file). A stage
directory is built under a temporary name and renamed into place only when complete, so a stage
killed mid-write leaves nothing that is served later. On lookup every checksum is verified; a
corrupt or partial artifact is removed and recomputed. The final rename of a key is serialized
across processes by a file lock in ``<workdir>/.locks/`` (``filelock``), so several ``cape`` runs
can share a workdir.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import platform
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from filelock import FileLock

from cape_pipeline import __version__
from cape_pipeline._utils import (
    canonical_json,
    fsync_path,
    fsync_tree,
    hash_bytes,
    hash_file,
    write_json_atomic,
)

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_TMP_PREFIX = ".tmp-"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the package version and every file of the installed package: its ``.py`` files
    and its package data (the bundled catalog, ``data/``), bytecode caches excluded.

    Part of every cache key, so a result made by other code or data (an edited source tree,
    another release, an edited bundled file) is never served.
    """
    root = Path(str(resources.files("cape_pipeline")))
    parts: list[str] = [__version__]
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts or p.suffix in (".pyc", ".pyo"):
            continue
        parts += [str(p.relative_to(root)), hash_file(p)]
    return hash_bytes(*parts)


def library_versions() -> dict[str, str]:
    """Versions of Python and the main libraries, recorded in every manifest."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "cape_pipeline": __version__}
    for name in ("numpy", "scipy", "pandas", "anndata", "scanpy", "torch", "geoopt", "networkx", "gcastle"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def stage_key(stage: str, params: Mapping[str, Any], upstream: Mapping[str, str], fingerprint: str = "") -> str:
    """Cache key of a stage run: a hash of the stage name, its parameters (canonical JSON), the
    keys of its upstream stages, an input-data fingerprint, :func:`code_fingerprint`, torch's
    intra-op thread count and, for :data:`WORLD_SIZE_STAGES`, the torchrun world size.

    The thread count is in the key because torch's CPU reductions split their sums by thread:
    the same seed with ``--threads 1`` and ``--threads 2`` gave encodings that differ by up to
    7e-4, so each count gets its own artifacts instead of one serving the other.

    Returns
    -------
    str
        32 hex characters.
    """
    import torch

    threads = f"torch_threads={torch.get_num_threads()}"
    parts = [stage, canonical_json(dict(params)), canonical_json(dict(upstream)), fingerprint, code_fingerprint(), threads]
    if stage in WORLD_SIZE_STAGES:
        parts.append(f"world_size={_world_size()}")
    return hash_bytes(*parts)


WORLD_SIZE_STAGES = frozenset({"discover", "train"})
"""Stages that train data-parallel under ``torchrun`` (:mod:`cape_pipeline.distributed`): their
numbers follow the world size (dropout masks are drawn per rank; sums are split differently),
so the world size is part of their cache keys. The other stages compute the same on every rank."""


def _world_size() -> int:
    """``WORLD_SIZE`` of a torchrun launch (1 otherwise); read from the environment, which
    torchrun sets before the process group opens."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


class ArtifactCache:
    """Stage artifacts under ``root``: lookup with verification, atomic store.

    Parameters
    ----------
    root
        The work directory (``--workdir``); created on first store.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, stage: str, key: str) -> Path:
        """Directory of the artifact of ``stage`` with ``key`` (may not exist)."""
        return self.root / stage / key

    def verify(self, stage: str, key: str) -> tuple[bool, str]:
        """Check that the artifact exists and that its manifest and every file's checksum match.

        Returns
        -------
        (bool, str)
            ``(True, "")`` when valid, else ``(False, reason)``.
        """
        d = self.path(stage, key)
        if not d.is_dir():
            return False, "absent"
        try:
            manifest = json.loads((d / MANIFEST).read_text())
        except (OSError, ValueError) as exc:
            return False, f"unreadable manifest ({exc})"
        if manifest.get("key") != key or manifest.get("stage") != stage:
            return False, "manifest names another stage or key"
        for name, meta in manifest.get("files", {}).items():
            f = d / name
            if not f.is_file():
                return False, f"missing file {name}"
            if f.stat().st_size != meta["size"] or hash_file(f) != meta["blake2b"]:
                return False, f"checksum mismatch in {name}"
        return True, ""

    def lookup(self, stage: str, key: str) -> Path | None:
        """Return the artifact directory if present and valid; remove it if corrupt.

        A hit sets the directory's modification time to now: ``cape cache list`` shows it as
        "last used" and ``prune`` removes the least recently used first.
        """
        ok, why = self.verify(stage, key)
        if ok:
            with contextlib.suppress(OSError):  # a read-only workdir still serves its artifacts
                os.utime(self.path(stage, key))
            return self.path(stage, key)
        if why != "absent":
            # under the key's lock, and only if still corrupt: another process may have just
            # renamed a valid artifact into place
            with self._lock(stage, key):
                ok, why = self.verify(stage, key)
                if ok:
                    return self.path(stage, key)
                if why != "absent":
                    log.warning("%s: cached artifact %s is corrupt (%s); recomputing", stage, key[:12], why)
                    shutil.rmtree(self.path(stage, key), ignore_errors=True)
        return None

    def _lock(self, stage: str, key: str, purpose: str = "") -> FileLock:
        """The inter-process lock of one key: ``<root>/.locks/<stage>-<key>.lock`` for publishing,
        ``<stage>-<key>.<purpose>.lock`` for another purpose (``"compute"``)."""
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        name = f"{stage}-{key}.{purpose}.lock" if purpose else f"{stage}-{key}.lock"
        return FileLock(str(locks / name), is_singleton=False)

    @contextlib.contextmanager
    def computing(self, stage: str, key: str) -> Any:
        """Hold the right to compute ``stage``'s artifact ``key``, one process at a time.

        A second process that wants the same key while a first computes it logs "waiting for
        another run computing <stage> …" and blocks until the first is done; it then looks the
        key up (:meth:`lookup`) and, when the first stored it, reuses it. Yields the artifact
        directory when another run stored it meanwhile, else ``None`` (compute it now, still
        holding the lock). The lock is an OS file lock (``filelock``, ``flock`` on POSIX) on
        ``<root>/.locks/<stage>-<key>.compute.lock``: the kernel releases it when its holder
        exits, so a run killed with SIGKILL never blocks the next one. Under ``torchrun``
        (``WORLD_SIZE`` > 1) every rank computes together and no lock is taken.
        """
        if _world_size() > 1:
            yield None
            return
        from filelock import Timeout

        lock = self._lock(stage, key, "compute")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.info("waiting for another run computing %s (key %s, lock %s)", stage, key[:12], lock.lock_file)
            t0 = time.perf_counter()
            lock.acquire()
            log.info("%s: the other run finished after %.1f s of waiting", stage, time.perf_counter() - t0)
        try:
            yield self.lookup(stage, key)
        finally:
            lock.release()

    def manifest(self, stage: str, key: str) -> dict[str, Any]:
        """The parsed ``manifest.json`` of a stored artifact."""
        return json.loads((self.path(stage, key) / MANIFEST).read_text())

    def store(
        self,
        stage: str,
        key: str,
        write: Callable[[Path], None],
        manifest: Mapping[str, Any],
    ) -> Path:
        """Write an artifact atomically.

        ``write(tmpdir)`` writes the stage's files into a fresh temporary directory; then the
        manifest (with file sizes and checksums) is written and the directory renamed to
        ``<root>/<stage>/<key>``. If ``write`` raises, the temporary directory is removed and
        nothing is stored.
        """
        stage_dir = self.root / stage
        stage_dir.mkdir(parents=True, exist_ok=True)
        tmp = stage_dir / f"{_TMP_PREFIX}{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            write(tmp)
            files = {
                p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "blake2b": hash_file(p)}
                for p in sorted(tmp.rglob("*"))
                if p.is_file() and p.relative_to(tmp).as_posix() != MANIFEST
            }
            full = {
                **manifest,
                "stage": stage,
                "key": key,
                "files": files,
                "versions": library_versions(),
                "code_fingerprint": code_fingerprint(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            write_json_atomic(tmp / MANIFEST, full)
            fsync_tree(tmp)  # every byte on disk before the rename publishes it
            final = self.path(stage, key)
            # One writer at a time per key (several `cape` processes may share a workdir). The
            # key is content-derived, so a valid artifact stored meanwhile by another process is
            # the same result: keep it and drop ours. A corrupt leftover is moved aside first and
            # removed only after the new artifact is in place, so each rename is atomic and a
            # killed process leaves the old or the new artifact, never a half-written one.
            with self._lock(stage, key):
                if self.verify(stage, key)[0]:
                    shutil.rmtree(tmp, ignore_errors=True)
                    return final
                trash = None
                if final.exists():
                    trash = stage_dir / f"{_TMP_PREFIX}{key}-old-{uuid.uuid4().hex[:8]}"
                    os.rename(final, trash)
                os.rename(tmp, final)
                fsync_path(stage_dir)
                if trash is not None:
                    shutil.rmtree(trash, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._sweep(stage_dir)
        return final

    @staticmethod
    def _sweep(stage_dir: Path, max_age_s: float = 24 * 3600) -> None:
        """Remove temporary directories left by killed writers (older than ``max_age_s``)."""
        now = time.time()
        for p in stage_dir.glob(f"{_TMP_PREFIX}*"):
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > max_age_s:
                    shutil.rmtree(p, ignore_errors=True)

    # ------------------------------------------------------------------ inspection and pruning
    def entries(self) -> list[CacheEntry]:
        """Every stored artifact (valid or not), newest use first; never reads the data files."""
        out: list[CacheEntry] = []
        if not self.root.is_dir():
            return out
        for stage_dir in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for d in sorted(p for p in stage_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
                try:
                    man = json.loads((d / MANIFEST).read_text())
                except (OSError, ValueError):
                    man = {}
                size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
                out.append(CacheEntry(
                    stage=stage_dir.name, key=d.name, path=d, source=str(man.get("source", "?")),
                    size_bytes=size, created=str(man.get("created", "?")), last_used=d.stat().st_mtime,
                    current_code=man.get("code_fingerprint") == code_fingerprint(),
                ))
        return sorted(out, key=lambda e: -e.last_used)

    def remove(self, entry: CacheEntry) -> None:
        """Remove one artifact under its key's lock (renamed aside first, so it vanishes at once)."""
        with self._lock(entry.stage, entry.key):
            if not entry.path.exists():
                return
            trash = entry.path.parent / f"{_TMP_PREFIX}{entry.key}-pruned-{uuid.uuid4().hex[:8]}"
            os.rename(entry.path, trash)
            shutil.rmtree(trash, ignore_errors=True)

    def select_prune(
        self,
        *,
        older_than_days: float | None = None,
        max_bytes: int | None = None,
        source: str | None = None,
        stale_code: bool = False,
    ) -> list[CacheEntry]:
        """The artifacts ``prune`` would remove: not used for ``older_than_days``, of dataset
        ``source``, made by other code (``stale_code``: they can never be served again), and then
        the least recently used until the rest fits in ``max_bytes``. No criterion: nothing."""
        entries = self.entries()
        now = time.time()
        chosen = [
            e for e in entries
            if (older_than_days is not None and now - e.last_used > older_than_days * 86400)
            or (source is not None and e.source == source)
            or (stale_code and not e.current_code)
        ]
        if max_bytes is not None:
            keep = [e for e in entries if e not in chosen]
            total = sum(e.size_bytes for e in keep)
            for e in sorted(keep, key=lambda e: e.last_used):  # least recently used first
                if total <= max_bytes:
                    break
                chosen.append(e)
                total -= e.size_bytes
        return chosen


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One stored artifact: ``<workdir>/<stage>/<key>/``.

    Attributes
    ----------
    stage, key, path
        Where it is.
    source
        The dataset it was made from (the manifest's ``source``; ``?`` when unreadable).
    size_bytes
        Bytes of its files.
    created
        ISO time it was stored (UTC).
    last_used
        Epoch seconds of its last store or cache hit (the directory's mtime).
    current_code
        Whether this package's code made it (otherwise no key can reach it any more).
    """

    stage: str
    key: str
    path: Path
    source: str
    size_bytes: int
    created: str
    last_used: float
    current_code: bool


def stale_temporaries(root: str | os.PathLike[str], *, min_age_s: float = 3600.0) -> list[Path]:
    """Temporary files and directories left under ``root`` by killed writers, older than ``min_age_s``.

    Covers the cache's ``.tmp-*`` directories (``<workdir>/<stage>/``) and ``atomic_path``'s /
    the exports' ``.<name>.*.tmp`` files and ``.<name>.*.old`` directories (``--out``). Younger
    ones may belong to a writer still running, so they are left alone.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    now = time.time()
    found = []
    for p in root.rglob(".*"):
        name = p.name
        if not (name.startswith(_TMP_PREFIX) or (name.endswith((".tmp", ".old")) and name.count(".") >= 2)):
            continue
        with contextlib.suppress(OSError):
            if now - p.lstat().st_mtime > min_age_s:
                found.append(p)
    # a directory found holds what is under it: report the outermost only
    return sorted(p for p in found if not any(q in p.parents for q in found))
