"""Every code block of README.md and docs/*.md runs as written: the user's guide is a test.

What the documents may assume, and how each kind of block is checked:

- ```` ```python ```` blocks run in document order, in one namespace per document, in a fresh
  folder that holds the files the documents name:

  - ``my.h5ad``: simulated UMI counts with a regulatory graph (300 cells × 400 genes), log
    values in ``X``, the raw counts in ``layers["counts"]``, ``obs["cell_type"]`` and a boolean
    ``var["tf"]`` (the regulators);
  - ``my.parquet``, ``my.csv``: the same cells as a table (``cell_id``, ``cell_type``, then one
    column of counts per gene);
  - ``results/``: what ``cape run my.h5ad --labels cell_type --counts-layer counts --out results/``
    writes, made here with a small training budget (:data:`SMALL_RUN`);
  - ``scGPT_human/``: a tiny random checkpoint in scGPT's release format
    (``tests/data/scgpt_tiny_pbmc``: 47 pbmc68k_reduced genes, width 32);
  - ``workflows/``: the repository's.

- ```` ```python no-run ```` blocks are compiled, not run (none so far).
- ```` ```yaml title="FILE" ```` blocks are written to FILE before the blocks after them run,
  and must read as a ``{stage: {param: value}}`` config.
- ```` ```bash ```` blocks: every ``cape …`` command (also after ``docker run … cape_pipeline``
  and ``$(which cape)``) goes through the real command line. ``cape params``, ``cape datasets``,
  ``cape cache …`` and ``--dry-run`` run; ``cape run`` and the stage commands make every check
  the command makes before a stage runs (options and their values, ``--config``, each ``--set``
  key and value across the stages, the labels and counts layer against the file) and run no
  stage; ``cape reproduce`` and ``docker run`` lines are parsed only. ``make TARGET`` must name a
  target of the Makefile. Other lines (``pip``, ``docker build``, ``snakemake``) are not run.

The whole file takes about a minute on a 2-core CPU.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

#: the training budget of the ``results/`` fixture (the command the documents show, made cheap)
SMALL_RUN = [
    "--set", "train.n_seeds=1", "--set", "train.compare=[none]", "--set", "train.tasks=[annotation]",
    "--set", "train.pretrain_epochs=1", "--set", "train.finetune_epochs=2", "--set", "embed.max_epochs=100",
    "--set", "evaluate.umap=false",
]

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


@dataclass
class Block:
    doc: str
    line: int
    lang: str
    info: str
    body: str


def blocks(doc: str) -> list[Block]:
    """The fenced code blocks of ``doc`` (a path relative to the repository root), in order."""
    text = (ROOT / doc).read_text()
    return [
        Block(doc, text.count("\n", 0, m.start()) + 2, m["lang"], m["info"].strip(), m["body"])
        for m in _FENCE.finditer(text)
    ]


def commands(body: str) -> list[str]:
    """The command lines of a bash block: continuations joined, comments and blanks dropped."""
    joined = body.replace("\\\n", " ")
    lines = [shlex.split(ln.replace("$(which cape)", "cape"), comments=True) for ln in joined.splitlines()]
    return [" ".join(shlex.quote(t) for t in toks) for toks in lines if toks]


# ---------------------------------------------------------------- the folder the documents assume


def _write_h5ad_and_tables(folder: Path) -> None:
    import scanpy as sc

    from cape_pipeline.datasets import simulated_hill_counts

    a = simulated_hill_counts(300, 400, n_types=3, seed=3)
    del a.varp["true_dag"]
    a.uns = {}
    a.layers["counts"] = a.X.copy()
    sc.pp.normalize_total(a, target_sum=1e4)
    sc.pp.log1p(a)
    a.write_h5ad(folder / "my.h5ad")
    import pandas as pd

    df = pd.DataFrame(a.layers["counts"].toarray(), columns=a.var_names)
    df.insert(0, "cell_type", a.obs["cell_type"].astype(str).to_numpy())
    df.insert(0, "cell_id", a.obs_names.to_numpy())
    df.to_parquet(folder / "my.parquet")
    df.to_csv(folder / "my.csv", index=False)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    """The files every document may read (see the module docstring), made once."""
    from cape_pipeline.cli import main

    folder = tmp_path_factory.mktemp("docs_files")
    _write_h5ad_and_tables(folder)
    shutil.copytree(ROOT / "tests" / "data" / "scgpt_tiny_pbmc", folder / "scGPT_human")
    with _chdir(folder):
        code = main(["run", "my.h5ad", "--labels", "cell_type", "--counts-layer", "counts", "--out", "results",
                     "--workdir", "cape_work", *SMALL_RUN])
    assert code == 0
    shutil.rmtree(folder / "cape_work")
    return folder


@pytest.fixture
def folder(shared, tmp_path) -> Path:
    """A fresh folder for one document, with the shared files linked in."""
    for p in shared.iterdir():
        (tmp_path / p.name).symlink_to(p)
    (tmp_path / "workflows").symlink_to(ROOT / "workflows")
    return tmp_path


@contextlib.contextmanager
def _chdir(path: Path):
    import os

    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# ---------------------------------------------------------------- bash: cape commands


def _checks_only(source, *, until=None, overrides=None, seed=None, device=None, labels=None, counts_layer=None,
                 **_ignored):
    """``run_pipeline`` up to the first stage: the checks it makes before running anything."""
    from cape_pipeline.io.layout import check_data_keys
    from cape_pipeline.pipeline.config import data_keys, merge
    from cape_pipeline.pipeline.runner import RunResult, build_stage_configs, resolve_stages

    overrides = merge(overrides or {}, data_keys(labels, counts_layer))
    configs = build_stage_configs(resolve_stages(until), overrides, seed=seed, device=device, source=source)
    check_data_keys(source, labels=configs["ingest"].label_columns,
                    label_key=overrides.get("train", {}).get("label_key"),
                    counts_layer=overrides.get("preprocess", {}).get("counts_layer"))
    return RunResult([], [], {})


def _parse_only(args: list[str]) -> None:
    """Parse ``cape ARGS`` with the command line's own parser (options, types), running nothing."""
    import click
    import typer

    from cape_pipeline.cli import app

    cmd: click.Command = typer.main.get_command(app)
    ctx = cmd.make_context("cape", [], resilient_parsing=True)
    rest = list(args)
    while isinstance(cmd, click.Group):
        name, rest = rest[0], rest[1:]
        sub = cmd.get_command(ctx, name)
        assert sub is not None, f"cape {shlex.join(args)}: no command {name!r}"
        if isinstance(sub, click.Group):
            ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        else:
            sub.make_context(name, rest, parent=ctx).close()  # raises on an unknown option or a bad value
        cmd = sub


def _cape(args: list[str], monkeypatch, capsys) -> None:
    """Check one ``cape ARGS`` as the module docstring says."""
    import torch

    from cape_pipeline.cli import main

    if args[0] == "reproduce":
        _parse_only(args)
        return
    if args[0] not in ("params", "datasets", "cache") and "--dry-run" not in args:
        monkeypatch.setattr("cape_pipeline.pipeline.runner.run_pipeline", _checks_only)
    threads = torch.get_num_threads()
    try:
        code = main(args)
    finally:
        torch.set_num_threads(threads)
        monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 0, f"cape {shlex.join(args)}: exit {code}\n{err}"


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))


def _bash(block: Block, monkeypatch, capsys) -> int:
    """Check every command of a bash block; returns how many were cape commands."""
    n = 0
    for line in commands(block.body):
        toks = shlex.split(line)
        where = f"{block.doc}:{block.line}: {line}"
        if toks[0] == "make":
            assert set(toks[1:]) <= _makefile_targets(), f"{where}: not a Makefile target"
        elif toks[:2] == ["docker", "run"] and "cape_pipeline" in toks:
            args = toks[toks.index("cape_pipeline") + 1:]
            if args:
                _parse_only(args)
                n += 1
        elif "cape" in toks:
            _cape(toks[toks.index("cape") + 1:], monkeypatch, capsys)
            n += 1
    return n


# ---------------------------------------------------------------- running a document


def _yaml(block: Block, folder: Path) -> None:
    m = re.fullmatch(r'title="([^"]+)"', block.info)
    if not m:
        return
    from cape_pipeline.pipeline.config import read_config_file

    path = folder / m[1]
    path.write_text(block.body)
    assert read_config_file(path), f"{block.doc}:{block.line}: an empty config"


def run_document(doc: str, folder: Path, monkeypatch, capsys) -> dict:
    """Run or check every block of ``doc`` in ``folder``; returns the Python namespace."""
    import matplotlib

    matplotlib.use("Agg")
    ns: dict = {"__name__": "__docs__"}
    seen = {"python": 0, "bash": 0}
    with _chdir(folder):
        for b in blocks(doc):
            if b.lang == "python":
                code = compile("\n" * (b.line - 1) + b.body, str(ROOT / doc), "exec")
                if b.info != "no-run":
                    exec(code, ns)  # noqa: S102 - the document's own code
                    seen["python"] += 1
            elif b.lang == "bash":
                seen["bash"] += _bash(b, monkeypatch, capsys)
            elif b.lang == "yaml":
                _yaml(b, folder)
    import matplotlib.pyplot as plt

    plt.close("all")
    ns["__seen__"] = seen
    return ns


def _check_readme(ns: dict, folder: Path) -> None:
    adata = ns["adata"]
    assert adata.varp["cape_dag"].nnz > 0 and adata.varm["cape_angles"].shape[0] == adata.n_vars
    assert (folder / "my_encodings" / "encodings.parquet").is_file()
    assert ns["y"].shape == ns["x"].shape and ns["q"].shape == ns["k"].shape


def _check_outputs(ns: dict, folder: Path) -> None:
    # every file docs/outputs.md names as part of a full run's --out is there
    text = (ROOT / "docs" / "outputs.md").read_text()
    table = text.split("<!-- files: begin -->", 1)[1].split("<!-- files: end -->", 1)[0]
    names = [n for row in re.findall(r"^\|([^|]*)\|", table, re.M) for n in re.findall(r"`([^`]+)`", row)]
    assert names
    for name in names:
        found = list((folder / "results").glob(name))
        assert found, f"docs/outputs.md names {name}, which `cape run --out` did not write"


CHECKS = {"README.md": _check_readme, "docs/outputs.md": _check_outputs}


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_document_runs(doc, folder, monkeypatch, capsys):
    ns = run_document(doc, folder, monkeypatch, capsys)
    if any(b.lang in ("python", "bash") for b in blocks(doc)):
        assert sum(ns["__seen__"].values()), f"{doc}: no block was run or checked"
    if doc in CHECKS:
        CHECKS[doc](ns, folder)


def test_every_document_is_covered():
    """docs/ holds the user's guide; each of its pages and README.md is run above."""
    assert {"docs/getting-started.md", "docs/outputs.md", "docs/configuration.md", "docs/api.md"} <= set(DOCUMENTS)
    for doc in DOCUMENTS:
        langs = {b.lang for b in blocks(doc)}
        assert langs <= {"python", "bash", "yaml", "text", ""}, f"{doc}: a block of a language this test skips: {langs}"


def test_bash_lines_are_split_as_a_shell_would():
    body = 'cape run my.h5ad --set "train.compare=[none]" \\\n    --out x   # comment\n\n# only a comment\n'
    assert commands(body) == ["cape run my.h5ad --set 'train.compare=[none]' --out x"]
    assert commands("torchrun --nproc_per_node=2 $(which cape) run a\n") == ["torchrun --nproc_per_node=2 cape run a"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_resolve():
    """Every relative link of README.md, docs/ and benchmarks/README.md names a file that exists
    and, with #anchor, a heading of it."""
    broken = []
    for doc in [*DOCUMENTS, "benchmarks/README.md"]:
        text = re.sub(r"^```.*?^```", "", (ROOT / doc).read_text(), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (ROOT / doc).parent / path if path else ROOT / doc
            if not file.exists():
                broken.append(f"{doc}: {target}")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{doc}: {target} (no such heading)")
    assert not broken, broken
