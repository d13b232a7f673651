"""README.md's Python quickstart runs as written (issue 29: README snippets are tested)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _quickstart() -> str:
    text = README.read_text()
    section = text[text.index("## Python quickstart"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _block_after(heading_text: str) -> str:
    text = README.read_text()
    section = text[text.index(heading_text):]
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
    # then the snippet that plugs exported encodings into one's own attention layer, as written,
    # with x, q, k of the shapes its comments give
    import torch

    enc = ns["enc"]
    enc.save(tmp_path / "out" / "pbmc")
    m, d = adata.n_vars, enc.d
    ns.update(x=torch.randn(2, m, 2 * d), q=torch.randn(2, 4, m, 2 * d // 4), k=torch.randn(2, 4, m, 2 * d // 4))
    exec(compile(_block_after("Plugging exported encodings"), "README.md plug-in", "exec"), ns)  # noqa: S102
    assert ns["y"].shape == (2, m, 2 * d) and ns["q"].shape == (2, 4, m, 2 * d // 4)
