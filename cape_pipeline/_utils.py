"""Small shared helpers: content hashing and atomic file writes.

Artifacts are never half-written: every writer here writes to a temporary file in the same
directory and renames it into place (``os.replace`` is atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

_CHUNK = 1 << 20


def hash_bytes(*parts: bytes | str) -> str:
    """BLAKE2b-128 hex digest of the concatenated ``parts`` (strings are UTF-8 encoded).

    Parameters
    ----------
    *parts
        Byte strings or str; each is length-prefixed so that ("ab", "c") != ("a", "bc").

    Returns
    -------
    str
        32 hexadecimal characters.
    """
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        b = p.encode("utf-8") if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def hash_file(path: str | os.PathLike[str]) -> str:
    """BLAKE2b-128 hex digest of a file's content, read in 1 MiB chunks (O(1) memory)."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def array_bytes(a: Any) -> list[Any]:
    """The byte buffers that :func:`hash_array` hashes after its header: a scipy.sparse matrix's
    canonical CSR parts (data, indices, indptr; duplicates summed, indices sorted), a dense
    array's values (object arrays as their str joined by NUL). Hashing the row blocks of a
    matrix one after the other covers it without holding it in memory."""
    import scipy.sparse as sp

    if sp.issparse(a):
        a = sp.csr_matrix(a)
        a.sum_duplicates()
        a.sort_indices()
        return [np.ascontiguousarray(part).view(np.uint8).data for part in (a.data, a.indices, a.indptr)]
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype == object:
        return ["\x00".join(map(str, a.ravel())).encode("utf-8")]
    return [a.view(np.uint8).data]


def hash_array(a: Any) -> str:
    """Content hash of a dense numpy array or a scipy.sparse matrix (shape, dtype and values).

    Sparse matrices are hashed through their canonical CSR form (data, indices, indptr), so the
    same matrix in CSR or CSC gives the same digest (:func:`array_bytes`).
    """
    import scipy.sparse as sp

    h = hashlib.blake2b(digest_size=16)
    sparse = sp.issparse(a)
    if not sparse:
        a = np.asarray(a)
    h.update(f"{'csr' if sparse else 'dense'}{a.shape}{a.dtype}".encode())
    for buf in array_bytes(a):
        h.update(buf)
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal configs give equal strings (and hashes)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def current_umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file's or a directory's data and metadata to the disk (``fsync``).

    A directory is fsynced so that a rename into it (the publishing step of an artifact) survives
    a power loss. Where a platform cannot open a directory for it (Windows), nothing happens.
    """
    flags = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if os.path.isdir(path) else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except (IsADirectoryError, PermissionError):  # a platform that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        if not os.path.isdir(path):
            raise
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike[str]) -> None:
    """:func:`fsync_path` every file and directory under ``root``, then ``root`` itself."""
    root = Path(root)
    for p in sorted(root.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        fsync_path(p)
    fsync_path(root)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on clean exit fsync it, rename it onto ``path``
    and fsync the directory (so after a power loss ``path`` is the old or the new file, whole).

    On an exception the temporary file is removed and ``path`` is left as it was, so readers
    never see a partially written file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_path(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("done")
    >>> (d / "x.txt").read_text()
    'done'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp makes it 0600; give it the mode open() would (umask)
            os.chmod(tmp_path, 0o666 & ~current_umask())
            fsync_path(tmp_path)  # the bytes are on disk before the name points at them
        os.replace(tmp_path, path)
        fsync_path(path.parent)  # and the rename survives a power loss
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on clean exit fsync every file in it and
    rename it onto ``path`` (an existing ``path`` is moved aside first and removed only once the
    new directory is in place), then fsync the parent.

    The directory form of :func:`atomic_path`: readers see the old directory or the new one,
    whole. On an exception the temporary directory is removed and ``path`` is left as it was.
    The names (``.<name>.*.tmp``, ``.<name>.*.old``) are those
    :func:`cape_pipeline.pipeline.cache.stale_temporaries` finds after a crash.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_dir(d / "model") as tmp:
    ...     _ = (tmp / "config.json").write_text("{}")
    >>> sorted(p.name for p in (d / "model").iterdir())
    ['config.json']
    """
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700; the final dir follows the umask
    try:
        yield tmp
        fsync_tree(tmp)  # every byte on disk before the rename publishes it
        if path.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, trash / "old")
            os.replace(tmp, path)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, path)
        fsync_path(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


@contextlib.contextmanager
def seeded_global_rngs(seed: int) -> Iterator[None]:
    """Seed numpy's, Python's and torch's (CPU) global RNGs inside the block and restore them, with
    torch's default dtype, afterwards: for libraries that draw from the global generators
    (gcastle's simulator; ``dagma``, which also calls ``torch.set_default_dtype``)."""
    import random

    import torch

    np_state, py_state, dtype = np.random.get_state(), random.getstate(), torch.get_default_dtype()
    np.random.seed(seed)
    random.seed(seed)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
        torch.set_default_dtype(dtype)


def check_device(device: Any, where: str = "device") -> None:
    """Raise unless ``device`` is ``"auto"``, ``"cpu"``, an available ``"cuda[:i]"`` or such a
    ``torch.device``.

    Raises
    ------
    CapeConfigError
        Naming ``where`` (e.g. ``embed.device``): not a device name, or CUDA requested where
        there is none.
    """
    import torch

    from cape_pipeline.errors import CapeConfigError

    if isinstance(device, str) and device == "auto":
        return
    try:
        dev = device if isinstance(device, torch.device) else torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CapeConfigError(f"{where}: expected 'auto', 'cpu' or 'cuda[:i]', got {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CapeConfigError(f"{where}: {device!r} requested but CUDA is not available; use 'auto' or 'cpu'")


def resolve_device(device: Any) -> Any:
    """The ``torch.device`` of a device name: ``"auto"`` → ``cuda`` when CUDA is available, else
    ``cpu``; any other name or ``torch.device`` as torch reads it.

    Raises
    ------
    RuntimeError
        From :class:`torch.device` for a name torch does not know (configs reject those first,
        :func:`check_device`).
    """
    import torch

    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


#: share of a CUDA device's free memory one batch of work may take (:func:`batch_entries`)
CUDA_BATCH_SHARE = 0.25
#: largest batch on CUDA, in entries: 2³⁰ (8 GiB of float64 per copy)
CUDA_BATCH_CAP = 1 << 30


#: entries of one row block of a blocked computation on the CPU (~4M: 32 MiB of float64)
BLOCK_ENTRIES = 1 << 22


def batch_entries(device: Any, cpu_entries: int, *, bytes_per_entry: int) -> int:
    """Entries one batch of a blocked computation may hold on ``device``.

    On the CPU, ``cpu_entries`` (the blocking that keeps a batch within the caches and makes the
    arithmetic, and so the results, independent of the machine's memory). On CUDA, the batch is
    sized to the memory the device has free now: ``CUDA_BATCH_SHARE`` of it divided by
    ``bytes_per_entry`` (what one entry of the batch costs across every copy alive at once), at
    least ``cpu_entries`` and at most ``CUDA_BATCH_CAP``; larger batches launch fewer kernels.

    Parameters
    ----------
    device
        ``torch.device`` (or its name) the batch lives on.
    cpu_entries
        Entries per batch on the CPU and on other devices; int ≥ 1.
    bytes_per_entry
        Bytes of device memory one entry costs, summed over the copies alive at once; int ≥ 1.

    Returns
    -------
    int
        Entries per batch (≥ 1).
    """
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return int(cpu_entries)
    free, _ = torch.cuda.mem_get_info(dev)
    return int(min(CUDA_BATCH_CAP, max(cpu_entries, CUDA_BATCH_SHARE * free // max(1, bytes_per_entry))))


def shuffled_batches(
    n: int, batch_size: int, generator: Any, *, device: Any = None, stop: int | None = None, min_size: int = 1
) -> Iterator[Any]:
    """One epoch of minibatch row indices: the skeleton every training loop of the package shares
    (Step I's solvers, Step II's RSGD, the transformers).

    One ``torch.randperm(n, generator=generator)`` (moved to ``device`` when given), cut into
    consecutive slices of ``batch_size`` rows from 0 up to ``stop`` (default n); slices shorter
    than ``min_size`` are skipped. The permutation is drawn when iteration starts.

    Yields
    ------
    torch.Tensor
        ``(b,)`` int64 row indices, ``min_size ≤ b ≤ batch_size``.
    """
    import torch

    perm = torch.randperm(n, generator=generator)
    if device is not None:
        perm = perm.to(device)
    for start in range(0, n if stop is None else stop, batch_size):
        idx = perm[start : start + batch_size]
        if idx.numel() >= min_size:
            yield idx


def row_blocks(n_rows: int, n_cols: int, entries: int | None = None) -> list[slice]:
    """Slices of consecutive rows of an ``(n_rows, n_cols)`` matrix, each of about ``entries``
    elements (:data:`BLOCK_ENTRIES` when None; at least one row): the blocks of a row-wise pass
    whose temporaries stay small."""
    step = max(1, (BLOCK_ENTRIES if entries is None else int(entries)) // max(1, int(n_cols)))
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


#: above this many entries (1 GiB of float64) :func:`column_mean_sd` works in row blocks
LARGE_MATRIX_ENTRIES = 1 << 27


def column_mean_sd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and population sd of an ``(N, M)`` float array, as float64 ``(M,)``.

    Up to :data:`LARGE_MATRIX_ENTRIES` entries, ``x.mean(axis=0)`` and ``x.std(axis=0)``
    themselves; above, the same two-pass formulas over row blocks of :data:`BLOCK_ENTRIES`, so
    that no temporary of ``x``'s size is made (numpy's ``std`` holds ``x − mean``: another 8 GB at
    500,000 × 2,000), equal to numpy's up to the order of the float64 sums.
    """
    n, m = x.shape
    if n * m <= LARGE_MATRIX_ENTRIES:
        return x.mean(axis=0), x.std(axis=0)
    blocks = row_blocks(n, m)
    total = np.zeros(m)
    for s in blocks:
        total += x[s].sum(axis=0, dtype=np.float64)
    mean = total / n
    ss = np.zeros(m)
    for s in blocks:
        d = x[s] - mean
        ss += np.einsum("ij,ij->j", d, d)
    return mean, np.sqrt(ss / n)
