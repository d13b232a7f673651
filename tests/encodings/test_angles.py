from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cape_pipeline.causal.graph import CausalGraph
from cape_pipeline.encodings import CapeEncodings, encode, load_encodings
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError


def test_encode_angles_are_scaled_poincare(emb):
    enc = encode(emb)
    assert enc.angles.shape == (6, 4) and enc.d == 4 and enc.n_features == 6
    np.testing.assert_allclose(enc.angles, math.pi / 4 * enc.poincare, rtol=0, atol=0)
    np.testing.assert_allclose(enc.poincare, emb.hyperboloid[:, 1:] / (emb.hyperboloid[:, :1] + 1))
    assert np.all(np.abs(enc.angles) < math.pi / 4)
    assert enc.graph is emb.graph
    enc2 = encode(emb, scale=1.0)
    np.testing.assert_allclose(enc2.angles, enc2.poincare)


def test_encode_rejects_bad_scale_and_mismatched_graph(emb):
    with pytest.raises(CapeConfigError):
        encode(emb, scale=0.0)
    other = CausalGraph.from_edges([("x", "y")])
    with pytest.raises(CapeDataError):
        encode(emb, graph=other)


def test_roundtrip_save_load_align_exact(emb, tmp_path):
    enc = encode(emb)
    out = enc.save(tmp_path / "enc", manifest_extra={"data_fingerprint": "abc123"})
    assert sorted(p.name for p in out.iterdir()) == [
        "dag.parquet",
        "encodings.parquet",
        "manifest.json",
    ]
    back = load_encodings(out)
    for name in ("angles", "poincare", "hyperboloid", "pagerank"):
        np.testing.assert_array_equal(getattr(back, name), getattr(enc, name))
    assert list(back.feature_names) == list(enc.feature_names)
    assert back.scale == enc.scale
    assert (back.graph.adjacency != enc.graph.adjacency).nnz == 0
    assert back.manifest["data_fingerprint"] == "abc123"
    order = ["e", "a", "iso", "c"]
    aligned = back.align(order)
    want = enc.angles[[list(enc.feature_names).index(n) for n in order]]
    np.testing.assert_array_equal(aligned, want)


def test_files_readable_by_pandas_alone(emb, tmp_path):
    encode(emb).save(tmp_path / "enc")
    df = pd.read_parquet(tmp_path / "enc" / "encodings.parquet")
    assert list(df.columns[:3]) == ["feature", "pagerank", "angle_0"]
    assert "hyperboloid_4" in df.columns and "poincare_3" in df.columns
    dag = pq.read_table(tmp_path / "enc" / "dag.parquet").to_pandas()
    assert list(dag.columns) == ["source", "target", "weight"] and len(dag) == 5
    manifest = json.loads((tmp_path / "enc" / "manifest.json").read_text())
    assert manifest["d"] == 4 and manifest["scale"] == pytest.approx(math.pi / 4)
    assert set(manifest["files"]) == {"encodings.parquet", "dag.parquet"}
    assert "cape_pipeline_version" in manifest and manifest["embed_params"]["dim"] == 4


def test_scored_pairs_travel_with_the_encodings(emb, tmp_path):
    g = emb.graph
    scores = g.to_frame()[["source", "target"]].assign(score=np.linspace(1, 0.5, g.n_edges))
    scores.loc[len(scores)] = ["e", "a", 0.01]  # a pair not kept
    graph = CausalGraph(g.feature_names, g.adjacency, edge_scores=scores)
    encode(emb, graph=graph).save(tmp_path / "enc")
    manifest = json.loads((tmp_path / "enc" / "manifest.json").read_text())
    assert set(manifest["files"]) == {"encodings.parquet", "dag.parquet", "edge_scores.parquet"}
    assert len(pd.read_parquet(tmp_path / "enc" / "dag.parquet")) == g.n_edges
    es = pd.read_parquet(tmp_path / "enc" / "edge_scores.parquet")
    assert len(es) == g.n_edges + 1 and int(es["in_dag"].sum()) == g.n_edges
    pd.testing.assert_frame_equal(load_encodings(tmp_path / "enc").graph.edge_scores, scores)
    (tmp_path / "enc" / "edge_scores.parquet").write_bytes(b"x")
    with pytest.raises(CapeFileError, match="checksum"):
        load_encodings(tmp_path / "enc")


def test_save_refuses_overwrite_then_overwrites(emb, tmp_path):
    enc = encode(emb)
    enc.save(tmp_path / "enc")
    with pytest.raises(CapeFileError, match="overwrite"):
        enc.save(tmp_path / "enc")
    encode(emb, scale=0.5).save(tmp_path / "enc", overwrite=True)
    assert load_encodings(tmp_path / "enc").scale == 0.5
    assert [p.name for p in tmp_path.iterdir()] == ["enc"]  # no temp directories left behind


def test_manifest_extra_cannot_clobber(emb, tmp_path):
    with pytest.raises(CapeConfigError):
        encode(emb).save(tmp_path / "enc", manifest_extra={"d": 3})


def test_align_missing(emb):
    enc = encode(emb)
    names = ["a"] + [f"zz{i}" for i in range(15)]
    with pytest.raises(CapeDataError, match="15 of 16 features") as info:
        enc.align(names)
    assert "zz0" in str(info.value) and "and 5 more" in str(info.value)
    filled = enc.align(names, missing="zero")
    assert filled.shape == (16, 4)
    np.testing.assert_array_equal(filled[1:], 0.0)
    np.testing.assert_array_equal(filled[0], enc.angles[0])
    with pytest.raises(CapeConfigError):
        enc.align(names, missing="mean")


def test_encodings_without_graph(emb, tmp_path):
    enc = encode(emb)
    enc.graph = None
    enc.save(tmp_path / "enc")
    assert not (tmp_path / "enc" / "dag.parquet").exists()
    assert load_encodings(tmp_path / "enc").graph is None


# ------------------------------------------------------------------ corrupt directories
@pytest.fixture()
def saved(emb, tmp_path):
    return encode(emb).save(tmp_path / "enc")


def test_missing_directory(tmp_path):
    with pytest.raises(CapeFileError, match="no such directory"):
        load_encodings(tmp_path / "nope")


@pytest.mark.parametrize("fname", ["manifest.json", "encodings.parquet", "dag.parquet"])
def test_missing_file_is_named(saved, fname):
    (saved / fname).unlink()
    with pytest.raises(CapeFileError, match=fname.replace(".", r"\.")):
        load_encodings(saved)


def test_truncated_parquet_fails_checksum(saved):
    path = saved / "encodings.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CapeFileError, match="checksum"):
        load_encodings(saved)


def test_bad_manifest_json(saved):
    (saved / "manifest.json").write_text("{not json")
    with pytest.raises(CapeFileError, match="JSON"):
        load_encodings(saved)


def _rewrite(saved, df):
    """Replace encodings.parquet and refresh its checksum, to reach the value checks."""
    from cape_pipeline._utils import hash_file

    df.to_parquet(saved / "encodings.parquet", index=False)
    man = json.loads((saved / "manifest.json").read_text())
    man["files"]["encodings.parquet"]["blake2b"] = hash_file(saved / "encodings.parquet")
    (saved / "manifest.json").write_text(json.dumps(man))


def test_angle_mismatch(saved):
    df = pd.read_parquet(saved / "encodings.parquet")
    df["angle_0"] += 0.01
    _rewrite(saved, df)
    with pytest.raises(CapeDataError, match="scale"):
        load_encodings(saved)


def test_off_manifold(saved):
    df = pd.read_parquet(saved / "encodings.parquet")
    df["hyperboloid_0"] *= 1.1
    _rewrite(saved, df)
    with pytest.raises(CapeDataError, match="hyperboloid"):
        load_encodings(saved)


def test_nan_and_missing_column(saved):
    df = pd.read_parquet(saved / "encodings.parquet")
    bad = df.copy()
    bad.loc[0, "pagerank"] = np.nan
    _rewrite(saved, bad)
    with pytest.raises(CapeDataError, match="NaN"):
        load_encodings(saved)
    _rewrite(saved, df.drop(columns=["poincare_2"]))
    with pytest.raises(CapeDataError, match="poincare_2"):
        load_encodings(saved)


def test_poincare_outside_ball_rejected(tmp_path):
    enc = CapeEncodings(
        feature_names=np.array(["a"], dtype=object),
        angles=np.array([[math.pi / 4]]),
        poincare=np.array([[1.0]]),
        hyperboloid=np.array([[1.0, 0.0]]),
        pagerank=np.array([1.0]),
    )
    with pytest.raises(CapeDataError, match="‖e‖ < 1"):
        enc.save(tmp_path / "x")
