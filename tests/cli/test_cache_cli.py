"""`cape cache list | verify | prune` and the sweep of killed runs' temporary files."""

from __future__ import annotations

import os
import time

import pytest

from cape_pipeline import cli
from cape_pipeline.pipeline.cache import ArtifactCache, stale_temporaries


def _cape(capsys, *args: str) -> tuple[int, str]:
    rc = cli.main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


@pytest.fixture()
def workdir(tmp_path, capsys):
    wd = tmp_path / "w"
    assert cli.main(["preprocess", "sachs", "--workdir", str(wd)]) == 0
    capsys.readouterr()
    return wd


def test_list_shows_stage_key_dataset_size_and_use(workdir, capsys):
    rc, text = _cape(capsys, "cache", "list", "--workdir", str(workdir))
    assert rc == 0 and "2 artifact(s)" in text
    rows = [ln for ln in text.splitlines() if ln.startswith(("ingest", "preprocess"))]
    assert len(rows) == 2 and all("sachs" in r and " ago" in r and r.rstrip().endswith("yes") for r in rows)


def test_a_cache_hit_counts_as_use(workdir, capsys):
    cache = ArtifactCache(workdir)
    old = time.time() - 10 * 86400
    for e in cache.entries():
        os.utime(e.path, (old, old))
    assert all(time.time() - e.last_used > 9 * 86400 for e in cache.entries())
    assert cli.main(["preprocess", "sachs", "--workdir", str(workdir)]) == 0  # two cache hits
    assert all(time.time() - e.last_used < 3600 for e in cache.entries())


def test_verify_exits_1_on_a_corrupt_artifact(workdir, capsys):
    rc, text = _cape(capsys, "cache", "verify", "--workdir", str(workdir))
    assert rc == 0 and "2 of 2 artifact(s) verified" in text
    art = next((workdir / "preprocess").iterdir())
    victim = next(p for p in art.rglob("*") if p.is_file() and p.name != "manifest.json")
    victim.write_bytes(victim.read_bytes()[:-10])
    rc, text = _cape(capsys, "cache", "verify", "--workdir", str(workdir))
    assert rc == 1 and f"corrupt: preprocess/{art.name}" in text and "1 of 2" in text


def test_prune_is_a_dry_run_unless_yes(workdir, capsys):
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(workdir), "--dataset", "sachs")
    assert rc == 0 and "would remove 2 artifact(s)" in text and "--yes" in text
    assert len(ArtifactCache(workdir).entries()) == 2
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(workdir), "--dataset", "sachs", "--yes")
    assert rc == 0 and "removed 2 artifact(s)" in text
    assert ArtifactCache(workdir).entries() == []
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(workdir), "--dataset", "nothing-like-it", "--yes")
    assert "removed 0 artifact(s)" in text


def test_prune_by_size_removes_the_least_recently_used_first(workdir, capsys):
    cache = ArtifactCache(workdir)
    ingest = next(e for e in cache.entries() if e.stage == "ingest")
    old = time.time() - 3600
    os.utime(ingest.path, (old, old))
    budget = sum(e.size_bytes for e in cache.entries()) - 1  # one artifact must go
    chosen = cache.select_prune(max_bytes=budget)
    assert [e.stage for e in chosen] == ["ingest"]
    assert cache.select_prune() == []  # no criterion: nothing


def test_prune_by_age(workdir, capsys):
    cache = ArtifactCache(workdir)
    pre = next(e for e in cache.entries() if e.stage == "preprocess")
    old = time.time() - 40 * 86400
    os.utime(pre.path, (old, old))
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(workdir), "--older-than", "30", "--yes")
    assert rc == 0 and "removed 1 artifact(s)" in text
    assert [e.stage for e in ArtifactCache(workdir).entries()] == ["ingest"]


def test_stale_temporary_files_are_swept_fresh_ones_kept(workdir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    old = time.time() - 2 * 3600
    stale = [workdir / "preprocess" / ".tmp-0123abcd-9f9f9f9f", out / ".encodings.parquet.x1y2z3.tmp",
             out / ".cape_encodings.ab12cd.old"]
    stale[0].mkdir()
    (stale[0] / "half.h5ad").write_bytes(b"x")
    stale[1].write_bytes(b"partial")
    stale[2].mkdir()
    fresh = out / ".report.md.q9w8e7.tmp"
    fresh.write_text("a writer may still be here")
    for p in stale:
        os.utime(p, (old, old))
    assert sorted(stale_temporaries(workdir) + stale_temporaries(out)) == sorted(stale)
    rc, text = _cape(capsys, "cache", "list", "--workdir", str(workdir))
    assert "1 stale temporary file(s)" in text
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(workdir), "--out", str(out), "--yes")
    assert rc == 0 and "3 temporary file(s)" in text
    assert not any(p.exists() for p in stale) and fresh.exists()
    assert len(ArtifactCache(workdir).entries()) == 2  # the artifacts themselves are untouched


def test_bad_arguments_are_one_line(tmp_path, capsys):
    rc, text = _cape(capsys, "cache", "list", "--workdir", str(tmp_path / "nope"))
    assert rc == 2 and "no such directory" in text
    (tmp_path / "w").mkdir()
    rc, text = _cape(capsys, "cache", "prune", "--workdir", str(tmp_path / "w"), "--max-size", "lots")
    assert rc == 2 and "--max-size" in text
