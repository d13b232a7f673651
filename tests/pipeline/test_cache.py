from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cape_pipeline.errors import CapeConfigError
from cape_pipeline.pipeline import ArtifactCache, run_pipeline, stage_key
from cape_pipeline.pipeline import stages as st


def _events(**kw):
    seen = []
    r = run_pipeline(report=lambda s, rec, e: seen.append((s, e)), **kw)
    return r, [x for x in seen if x[1] != "start"]


def test_hit_miss_and_invalidation(tmp_path):
    kw = dict(source="sachs", until="preprocess", workdir=tmp_path)
    _, ev = _events(**kw)
    assert ev == [("ingest", "done"), ("preprocess", "done")]
    r, ev = _events(**kw)
    assert ev == [("ingest", "cached"), ("preprocess", "cached")]
    assert r.output("preprocess").shape == (7466, 11)  # lazily loaded from the cache
    # a changed preprocess parameter re-runs preprocess only
    _, ev = _events(overrides={"preprocess": {"transform": "arcsinh"}}, **kw)
    assert ev == [("ingest", "cached"), ("preprocess", "done")]
    # a changed ingest parameter re-runs everything downstream
    _, ev = _events(overrides={"ingest": {"modality": "synthetic"}}, **kw)
    assert ev == [("ingest", "done"), ("preprocess", "done")]


def test_file_content_is_the_key(tmp_path, table):
    p = tmp_path / "t.csv"
    table.drop(columns=["label", "cell_id"]).to_csv(p, index=False)
    kw = dict(source=str(p), until="ingest", workdir=tmp_path / "w")
    _, ev = _events(**kw)
    _, ev = _events(**kw)
    assert ev == [("ingest", "cached")]
    table.loc[0, "f0"] = 123.0  # same path, new content -> never served the old result
    table.drop(columns=["label", "cell_id"]).to_csv(p, index=False)
    r, ev = _events(**kw)
    assert ev == [("ingest", "done")]
    assert r.output("ingest").X[0, 0] == pytest.approx(123.0)


def test_corrupt_artifact_is_recomputed(tmp_path):
    kw = dict(source="sachs", until="preprocess", workdir=tmp_path)
    r, _ = _events(**kw)
    f = r.records[1].path / "preprocessed.h5ad"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    _, ev = _events(**kw)
    assert ev == [("ingest", "cached"), ("preprocess", "done")]
    # a partial artifact (file missing) is redone too
    (r.records[0].path / "adata.h5ad").unlink()
    _, ev = _events(**kw)
    assert ev[0] == ("ingest", "done")


def test_failed_write_leaves_nothing(tmp_path):
    cache = ArtifactCache(tmp_path)

    def write(d):
        (d / "part.bin").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache.store("stage", "k1", write, {})
    assert cache.lookup("stage", "k1") is None
    assert list((tmp_path / "stage").iterdir()) == []


def test_killed_mid_write_is_never_served(tmp_path):
    """A writer killed with SIGKILL halfway through leaves no artifact that lookup serves."""
    script = textwrap.dedent(f"""
        import time, pathlib
        from cape_pipeline.pipeline.cache import ArtifactCache
        def write(d):
            (d / "a.bin").write_bytes(b"x" * 1000)
            pathlib.Path({str(tmp_path / 'started')!r}).write_text("1")
            time.sleep(60)
        ArtifactCache({str(tmp_path / 'w')!r}).store("s", "key", write, {{}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    while not (tmp_path / "started").exists():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    cache = ArtifactCache(tmp_path / "w")
    assert cache.lookup("s", "key") is None
    assert not (tmp_path / "w" / "s" / "key").exists()
    # the next store succeeds and is served
    cache.store("s", "key", lambda d: (d / "a.bin").write_bytes(b"ok"), {})
    assert cache.lookup("s", "key") is not None


def test_failed_stage_keeps_earlier_artifacts(tmp_path, monkeypatch):
    def boom(inputs, cfg, ctx):
        raise ValueError("preprocess exploded")

    monkeypatch.setitem(st.STAGES, "preprocess", st.Stage(**{**st.STAGES["preprocess"].__dict__, "run": boom}))
    with pytest.raises(ValueError, match="exploded"):
        run_pipeline("sachs", until="preprocess", workdir=tmp_path)
    assert len(list((tmp_path / "ingest").iterdir())) == 1
    assert not (tmp_path / "preprocess").exists() or not any(
        p for p in (tmp_path / "preprocess").iterdir() if not p.name.startswith(".")
    )


def test_manifest_contents(tmp_path):
    r, _ = _events(source="sachs", until="preprocess", workdir=tmp_path, seed=3)
    m = json.loads((r.records[1].path / "manifest.json").read_text())
    assert m["stage"] == "preprocess" and m["upstream"] == {"ingest": r.records[0].key}
    assert m["params"]["transform"] == "log1p" and "seconds" in m["timings"]
    assert m["versions"]["cape_pipeline"] and m["files"]["preprocessed.h5ad"]["blake2b"]


def test_key_depends_on_everything():
    base = stage_key("s", {"a": 1}, {"u": "k"}, "fp")
    assert base == stage_key("s", {"a": 1}, {"u": "k"}, "fp")
    assert base != stage_key("s", {"a": 2}, {"u": "k"}, "fp")
    assert base != stage_key("s", {"a": 1}, {"u": "k2"}, "fp")
    assert base != stage_key("s", {"a": 1}, {"u": "k"}, "fp2")
    assert base != stage_key("t", {"a": 1}, {"u": "k"}, "fp")


def test_unknown_stage_or_param(tmp_path):
    with pytest.raises(CapeConfigError, match="unknown stage"):
        run_pipeline("sachs", until="preprocess", workdir=tmp_path, overrides={"prep": {"x": 1}})
    with pytest.raises(CapeConfigError, match="--until 'later'"):
        run_pipeline("sachs", until="later", workdir=tmp_path)
    with pytest.raises(CapeConfigError, match="preprocess.n_top_genes: expected an integer"):
        run_pipeline("sachs", until="preprocess", workdir=tmp_path, overrides={"preprocess": {"n_top_genes": "many"}})


def test_krumsiek11_with_int_keys_in_uns_is_cached(tmp_path):
    r = run_pipeline("krumsiek11", until="preprocess", workdir=tmp_path)
    assert r.output("preprocess").shape == (640, 11)


def _store_same_key(root: str, tag: str) -> str:
    from cape_pipeline.pipeline.cache import ArtifactCache

    def write(d):
        (d / "x.txt").write_text("same content")  # content-keyed: racing writers write the same thing

    return str(ArtifactCache(root).store("stage", "k" * 16, write, {"params": {}, "tag": tag}))


def test_concurrent_writers_of_one_key_all_succeed(tmp_path):
    """Several processes sharing a workdir: none crashes ("Directory not empty"), one artifact wins."""
    from concurrent.futures import ProcessPoolExecutor

    from cape_pipeline.pipeline.cache import ArtifactCache

    with ProcessPoolExecutor(max_workers=6) as ex:
        paths = list(ex.map(_store_same_key, [str(tmp_path)] * 12, [str(i) for i in range(12)]))
    assert len(set(paths)) == 1
    cache = ArtifactCache(tmp_path)
    assert cache.verify("stage", "k" * 16) == (True, "")
    assert not [p for p in (tmp_path / "stage").iterdir() if p.name.startswith(".tmp-")]


def test_store_over_a_corrupt_leftover_replaces_it(tmp_path):
    from cape_pipeline.pipeline.cache import ArtifactCache

    cache = ArtifactCache(tmp_path)
    final = tmp_path / "stage" / ("k" * 16)
    final.mkdir(parents=True)
    (final / "junk").write_text("half-written")
    _store_same_key(str(tmp_path), "new")
    assert cache.verify("stage", "k" * 16) == (True, "") and not (final / "junk").exists()


def test_outputs_follow_the_umask(tmp_path):
    import os
    import stat

    from cape_pipeline._utils import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("x")
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
        p = _store_same_key(str(tmp_path / "w"), "t")
        assert stat.S_IMODE((Path(p) / "x.txt").stat().st_mode) == 0o644
        assert stat.S_IMODE(Path(p).stat().st_mode) == 0o755
    finally:
        os.umask(old)


def test_catalog_name_pointed_at_other_data_is_not_served_from_cache(tmp_path, monkeypatch):
    """The cache keys a bundled dataset by its whole catalog entry, not by its name."""
    from cape_pipeline.io.catalog import CATALOG_ENV, catalog_path

    r1 = run_pipeline("sachs", until="ingest", workdir=tmp_path / "w")
    assert r1.output("ingest").n_obs == 7466
    doc = catalog_path().read_text().replace("loader: cape_pipeline.datasets:sachs", "loader: cape_pipeline.datasets:synthetic_mlp")
    alt = tmp_path / "catalog.yaml"
    alt.write_text(doc)
    monkeypatch.setenv(CATALOG_ENV, str(alt))
    r2 = run_pipeline("sachs", until="ingest", workdir=tmp_path / "w")
    assert not r2.records[0].cached and r2.output("ingest").n_obs != 7466


def test_code_fingerprint_covers_package_data():
    from importlib import resources

    from cape_pipeline.pipeline.cache import code_fingerprint

    code_fingerprint.cache_clear()
    root = Path(str(resources.files("cape_pipeline")))
    assert (root / "data_catalog.yaml").is_file()
    import cape_pipeline.pipeline.cache as cache_mod

    seen = []
    real = cache_mod.hash_file
    try:
        cache_mod.hash_file = lambda p: seen.append(Path(p).name) or real(p)
        code_fingerprint.cache_clear()
        code_fingerprint()
    finally:
        cache_mod.hash_file = real
        code_fingerprint.cache_clear()
    assert "data_catalog.yaml" in seen and any(n.endswith(".csv") for n in seen)
    assert not any(n.endswith(".pyc") for n in seen)


def test_stage_key_depends_on_torch_threads() -> None:
    """Same seed, other thread count → other floats: cached apart."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = stage_key("s", {"a": 1}, {"u": "k"}, "fp")
        torch.set_num_threads(2)
        two = stage_key("s", {"a": 1}, {"u": "k"}, "fp")
    finally:
        torch.set_num_threads(before)
    assert one != two


def test_lookup_does_not_delete_an_artifact_another_process_just_stored(tmp_path, monkeypatch):
    """lookup saw a corrupt artifact, but by the time it holds the key's lock another process
    has renamed a valid one into place: that one must be served, not deleted."""
    cache = ArtifactCache(tmp_path)
    path = cache.store("s", "k", lambda d: (d / "a.txt").write_text("new"), {})
    answers = iter([(False, "checksum mismatch in a.txt"), (True, "")])
    monkeypatch.setattr(ArtifactCache, "verify", lambda self, stage, key: next(answers))
    assert cache.lookup("s", "k") == path
    assert (path / "a.txt").read_text() == "new"


def test_world_size_is_in_the_key_of_the_data_parallel_stages(monkeypatch):
    """A torchrun run with 2 ranks never serves (or is served) a 1-process result
    of the stages that train data-parallel; the others are shared."""
    from cape_pipeline.pipeline.cache import WORLD_SIZE_STAGES, stage_key

    keys = {}
    for ws in ("1", "2"):
        monkeypatch.setenv("WORLD_SIZE", ws)
        keys[ws] = {st: stage_key(st, {"a": 1}, {"up": "k"}, "fp") for st in ("preprocess", "discover", "train")}
    assert WORLD_SIZE_STAGES == {"discover", "train"}
    assert keys["1"]["preprocess"] == keys["2"]["preprocess"]
    assert keys["1"]["discover"] != keys["2"]["discover"] and keys["1"]["train"] != keys["2"]["train"]
    monkeypatch.delenv("WORLD_SIZE")
    assert stage_key("train", {"a": 1}, {"up": "k"}, "fp") == keys["1"]["train"]
