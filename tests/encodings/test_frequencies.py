"""The geometric multi-frequency angle map: φ_i = c·ω_i·e_i, kept through save/load/AnnData."""

from __future__ import annotations

import json
import math

import anndata as ad
import numpy as np
import pytest

from cape_pipeline import tl
from cape_pipeline.encodings import CapeEncodings, EncodeConfig, encode, load_encodings
from cape_pipeline.encodings.config import pair_frequencies
from cape_pipeline.errors import CapeConfigError, CapeDataError, CapeFileError


def test_geometric_map_gives_each_pair_its_frequency(emb):
    enc = encode(emb, frequencies="geometric", frequency_range=8.0)
    w = enc.frequencies
    np.testing.assert_allclose(w, [1.0, 2.0, 4.0, 8.0])  # 8^(i/3)
    np.testing.assert_allclose(enc.angles, math.pi / 4 * w * enc.poincare, rtol=1e-12)
    paper = encode(emb)
    assert paper.frequencies is None
    np.testing.assert_allclose(enc.angles[:, 0], paper.angles[:, 0])  # pair 0 keeps the paper's c
    assert "frequencies=1…8" in repr(enc)
    assert pair_frequencies(4, EncodeConfig()) is None
    np.testing.assert_allclose(pair_frequencies(1, EncodeConfig(frequencies="geometric")), [1.0])


def test_frequencies_survive_save_load_and_checks(emb, tmp_path):
    enc = encode(emb, frequencies="geometric", frequency_range=100.0)
    enc.save(tmp_path / "enc")
    manifest = json.loads((tmp_path / "enc" / "manifest.json").read_text())
    assert len(manifest["frequencies"]) == 4
    back = load_encodings(tmp_path / "enc")
    np.testing.assert_allclose(back.frequencies, enc.frequencies)
    np.testing.assert_allclose(back.angles, enc.angles)
    # angles that do not follow the stated frequencies are refused
    bad = CapeEncodings(enc.feature_names, enc.angles, enc.poincare, enc.hyperboloid, enc.pagerank, scale=enc.scale)
    with pytest.raises(CapeDataError, match="scale · poincare"):
        bad.save(tmp_path / "bad")
    wrong = CapeEncodings(enc.feature_names, enc.angles, enc.poincare, enc.hyperboloid, enc.pagerank,
                          scale=enc.scale, frequencies=np.ones(3))
    with pytest.raises(CapeDataError, match="frequencies must be 4"):
        wrong.save(tmp_path / "wrong")
    # a manifest whose frequencies are not a list of numbers names the file
    manifest["frequencies"] = "fast"
    (tmp_path / "enc" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CapeFileError, match="frequencies"):
        load_encodings(tmp_path / "enc")


def test_old_exports_without_frequencies_still_load(emb, tmp_path):
    encode(emb).save(tmp_path / "enc")
    m = json.loads((tmp_path / "enc" / "manifest.json").read_text())
    del m["frequencies"]
    (tmp_path / "enc" / "manifest.json").write_text(json.dumps(m))
    assert load_encodings(tmp_path / "enc").frequencies is None


def test_tl_encode_geometric_and_from_anndata(emb):
    a = ad.AnnData(np.ones((3, 6), dtype=np.float32))
    a.var_names = [str(n) for n in emb.feature_names]
    a.varm["cape_poincare"] = np.asarray(emb.poincare)
    a.varm["cape_hyperboloid"] = np.asarray(emb.hyperboloid)
    a.var["cape_pagerank"] = np.asarray(emb.pagerank)
    tl.encode(a, frequencies="geometric", frequency_range=8.0)
    np.testing.assert_allclose(a.varm["cape_angles"], math.pi / 4 * np.array([1, 2, 4, 8]) * a.varm["cape_poincare"])
    enc = CapeEncodings.from_anndata(a, graph_key="absent")
    np.testing.assert_allclose(enc.frequencies, [1, 2, 4, 8])
    b = a.copy()
    tl.encode(b, encodings=enc)
    assert b.uns["cape"]["encode"]["frequencies"] == pytest.approx([1, 2, 4, 8])


def test_bad_frequency_options_name_the_option():
    with pytest.raises(CapeConfigError, match="frequencies"):
        EncodeConfig(frequencies="rope")
    with pytest.raises(CapeConfigError, match="frequency_range"):
        EncodeConfig(frequencies="geometric", frequency_range=0.5)
