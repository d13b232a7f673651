"""README.md's Python quickstart runs as written (issue 29: README snippets are tested)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _quickstart() -> str:
    text = README.read_text()
    section = text[text.index("## Python quickstart"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_quickstart_runs(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(_quickstart(), "README.md quickstart", "exec"), ns)  # noqa: S102 - the README's own code
    adata = ns["adata"]
    assert adata.varp["cape_dag"].nnz > 0 and adata.varm["cape_angles"].shape == (adata.n_vars, 32)
    assert (tmp_path / "my_encodings" / "encodings.parquet").is_file()
