"""Bad input gives one line on stderr that names the real problem."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import cape_pipeline.io as cio
from cape_pipeline.cli import main
from cape_pipeline.encodings import CapeEncodings
from cape_pipeline.errors import CapeDataError, CapeFileError
from cape_pipeline.io.readers import check_file_source
from cape_pipeline.pipeline.config import read_config_file


def _cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI; assert exit status 2 and one line on stderr; return that line."""
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("▶")]  # the stage-start line
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


def _write(path, text: str):
    path.write_text(text)
    return str(path)


# 1 ---------------------------------------------------------------- duplicate Parquet columns
def test_parquet_duplicate_column_names(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "dup.parquet"
    col = pa.array(np.arange(5, dtype=float))
    pq.write_table(pa.table([col, col, pa.array(np.ones(5))], names=["g1", "g1", "g2"]), p)
    line = _cli_error(["ingest", str(p), "--workdir", str(tmp_path / "w")], capsys)
    assert "dup.parquet: duplicate column name(s) ['g1']; feature names must be unique" in line
    assert "corrupt" not in line


# 2 ---------------------------------------------------------------- invalid YAML --config
@pytest.mark.parametrize(
    "text,needle",
    [
        ("preprocess: {n_top_genes: 5\n", "expected ',' or '}'"),
        ("a: b: c\n", "at line 1, column 5: mapping values are not allowed here"),
    ],
)
def test_invalid_yaml_config_is_one_line(tmp_path, capsys, text, needle):
    cfg = _write(tmp_path / "cfg.yaml", text)
    line = _cli_error(["preprocess", "sachs", "--config", cfg, "--workdir", str(tmp_path / "w")], capsys)
    assert "cfg.yaml: not valid YAML at line " in line and needle in line


def test_config_directory_and_binary(tmp_path):
    with pytest.raises(CapeFileError, match="is a directory; expected a YAML config file"):
        read_config_file(tmp_path)
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CapeFileError, match="b.yaml: not a text file"):
        read_config_file(tmp_path / "b.yaml")


# 3 ---------------------------------------------------------------- header-only table
@pytest.mark.parametrize("name,text", [("h.csv", "g1,g2,g3\n"), ("h.tsv", "g1\tg2\tg3\n")])
def test_header_only_table(tmp_path, capsys, name, text):
    f = _write(tmp_path / name, text)
    line = _cli_error(["preprocess", f, "--workdir", str(tmp_path / "w")], capsys)
    assert f"{name}: no data rows (only a header); expected one row per observation" in line
    assert "non-numeric" not in line


# 4 ---------------------------------------------------------------- wrong separator
@pytest.mark.parametrize(
    "name,text,needle",
    [
        ("semi.csv", "g1;g2;g3\n1;2;3\n4;5;6\n7;8;9\n", "the lines contain ';'"),
        ("euro.csv", "g1;g2\n1,5;2,5\n3,5;4,5\n", "the lines contain ';'"),
        ("tabs.csv", "g1\tg2\n1\t2\n3\t4\n", "rename it to tabs.tsv"),
        ("commas.tsv", "g1,g2\n1,2\n3,4\n", "rename it to commas.csv"),
    ],
)
def test_wrong_separator_is_named(tmp_path, capsys, name, text, needle):
    f = _write(tmp_path / name, text)
    line = _cli_error(["ingest", f, "--workdir", str(tmp_path / "w")], capsys)
    assert f"{name}: read as one column" in line and needle in line
    assert "comma-separated .csv and tab-separated .tsv" in line and "non-numeric" not in line


def test_single_column_table_still_reads(tmp_path):
    a = cio.read(_write(tmp_path / "one.csv", "g1\n1\n2\n3\n"))
    assert a.shape == (3, 1)


# 5 ---------------------------------------------------------------- directory as SOURCE
def test_directory_source_library(tmp_path):
    d = tmp_path / "some_dir"
    d.mkdir()
    for src in (str(d), str(d) + "/"):
        with pytest.raises(CapeFileError, match=r"some_dir/?: is a directory; expected a \.h5ad, .*catalog name"):
            check_file_source(src)
        with pytest.raises(CapeFileError, match="is a directory"):
            cio.read(src)
    with pytest.raises(CapeFileError, match="nope.csv: no such file"):
        check_file_source(tmp_path / "nope.csv")
    f = tmp_path / "ok.csv"
    f.write_text("g\n1\n2\n")
    assert check_file_source(f) == f


def test_directory_source_cli(tmp_path, capsys):
    d = tmp_path / "some_dir"
    d.mkdir()
    line = _cli_error(["ingest", str(d), "--workdir", str(tmp_path / "w")], capsys)
    assert "some_dir: is a directory; expected a .h5ad, .parquet, .csv or .tsv file" in line


# 6 ---------------------------------------------------------------- encodings for other data
def _encodings(names: list[str]) -> CapeEncodings:
    m = len(names)
    e = np.full((m, 1), 0.5)
    return CapeEncodings(np.array(names, dtype=object), np.pi / 4 * e, e, np.zeros((m, 2)), np.full(m, 1 / m))


@pytest.mark.parametrize("missing", ["zero", "error"])
def test_align_without_any_shared_feature(missing):
    enc = _encodings(["ENSG1", "ENSG2", "ENSG3"])
    with pytest.raises(CapeDataError) as info:
        enc.align(["CD4", "CD8A"], missing=missing)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1
    assert msg.startswith("encodings: none of the data's 2 features are in the encodings")
    assert "'CD4'" in msg and "'ENSG1'" in msg and "made for other data" in msg


def test_align_partial_overlap_warns_with_count(caplog):
    enc = _encodings(["a", "b"])
    with caplog.at_level(logging.WARNING, logger="cape_pipeline.encodings.angles"):
        out = enc.align(["b", "c", "d"], missing="zero")
    np.testing.assert_allclose(out[:, 0], [np.pi / 8, 0.0, 0.0])
    assert "2 of 3 data features have no encoding and get angle 0" in caplog.text
