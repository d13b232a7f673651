"""Durability: every published artifact is fsynced, file and directory entry,
before the rename that publishes it and after it, so a power loss leaves the old or the new
artifact whole; a corrupt cached artifact is reported in one line and recomputed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from cape_pipeline._utils import atomic_path
from cape_pipeline.pipeline.cache import ArtifactCache

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fsynced fds")


@pytest.fixture()
def journal(monkeypatch):
    """Record, in order, every fsync (by path) and every rename / replace (source → target)."""
    events: list[tuple[str, str]] = []
    real_fsync, real_rename, real_replace = os.fsync, os.rename, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def rename(src, dst, *a, **k):
        events.append(("rename", f"{os.path.realpath(src)} -> {os.path.realpath(dst)}"))
        return real_rename(src, dst, *a, **k)

    def replace(src, dst, *a, **k):
        events.append(("rename", f"{os.path.realpath(src)} -> {os.path.realpath(dst)}"))
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _before(events, kind, match, then_kind, then_match):
    i = next(k for k, (e, p) in enumerate(events) if e == kind and match(p))
    j = next(k for k, (e, p) in enumerate(events) if e == then_kind and then_match(p))
    return i < j


def test_atomic_path_fsyncs_file_then_renames_then_fsyncs_dir(tmp_path, journal):
    target = tmp_path / "x.json"
    with atomic_path(target) as tmp:
        tmp.write_text("{}")
    tmp_name = str(tmp.resolve())
    assert _before(journal, "fsync", lambda p: p == tmp_name, "rename", lambda p: p.startswith(tmp_name))
    assert _before(journal, "rename", lambda p: p.endswith(str(target)), "fsync", lambda p: p == str(tmp_path))


def test_cache_store_fsyncs_every_file_before_publishing(tmp_path, journal):
    cache = ArtifactCache(tmp_path / "w")

    def write(d: Path) -> None:
        (d / "sub").mkdir()
        np.save(d / "a.npy", np.arange(10))
        (d / "sub" / "b.txt").write_text("b")

    final = cache.store("stage", "k" * 32, write, {"params": {}})
    publish = next(k for k, (e, p) in enumerate(journal) if e == "rename" and p.endswith(str(final)))
    synced = {p for e, p in journal[:publish] if e == "fsync"}
    tmp_dir = journal[publish][1].split(" -> ")[0]
    for name in ("a.npy", "sub/b.txt", "manifest.json", "sub", ""):
        assert str(Path(tmp_dir) / name).rstrip("/") in synced, name
    assert ("fsync", str(final.parent)) in journal[publish:]


def test_a_corrupt_artifact_is_reported_in_one_line_and_recomputed(tmp_path, capsys):
    from cape_pipeline import cli

    wd = tmp_path / "w"
    assert cli.main(["preprocess", "sachs", "--workdir", str(wd)]) == 0
    capsys.readouterr()
    art = next((wd / "preprocess").iterdir())
    victim = next(p for p in art.rglob("*") if p.is_file() and p.name != "manifest.json")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert cli.main(["preprocess", "sachs", "--workdir", str(wd)]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "is corrupt" in ln]
    assert len(lines) == 1 and f"checksum mismatch in {victim.name}" in lines[0] and "recomputing" in lines[0], err
    assert "✓ preprocess done" in err  # recomputed, not served


def test_a_full_disk_mid_run_is_one_line_and_earlier_stages_stay(tmp_path, capsys, monkeypatch):
    """ENOSPC while a stage stores its artifact: one line naming it, exit 1, nothing partial; the
    stages before it stay cached and a rerun (disk freed) resumes."""
    import errno

    from cape_pipeline import cli
    from cape_pipeline.pipeline import cache as cache_mod

    wd = tmp_path / "w"
    real = cache_mod.write_json_atomic

    def full(path, obj):
        if "preprocess" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, obj)

    monkeypatch.setattr(cache_mod, "write_json_atomic", full)
    rc = cli.main(["preprocess", "sachs", "--workdir", str(wd)])
    err = capsys.readouterr().err
    assert rc == 1 and "No space left on device" in err and "rerun the same command" in err, err
    assert "Traceback" not in err
    assert [p.name for p in (wd / "preprocess").iterdir()] == []  # nothing partial
    monkeypatch.setattr(cache_mod, "write_json_atomic", real)
    assert cli.main(["preprocess", "sachs", "--workdir", str(wd)]) == 0
    assert "1 ran, 1 from cache" in capsys.readouterr().err
