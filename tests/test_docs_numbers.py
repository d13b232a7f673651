"""One source for every number the user-facing texts state.

The cost tables of ``benchmarks/scale/RESULTS.md`` (README links to them) are rendered from
``benchmarks/scale/scale.jsonl`` and ``step1.jsonl`` by ``benchmarks/scale/scale_report.py``; these
tests fail when someone edits one without the other. README.md quotes almost no number; each one
it does is checked against its source here.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(*parts: str):
    """A benchmark script imported as a module (registered in sys.modules: dataclasses need that)."""
    path = ROOT.joinpath("benchmarks", *parts)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _report():
    return _script("scale", "scale_report.py")


RESULTS = ROOT / "benchmarks" / "scale" / "RESULTS.md"


def _block(text: str, name: str) -> str:
    return text.split(f"<!-- {name}: begin -->\n", 1)[1].split(f"\n<!-- {name}: end -->", 1)[0]


def test_cost_table_is_rendered_from_the_measurements():
    rep = _report()
    assert _block(RESULTS.read_text(), "cost") == rep.cost_table(rep.load()), (
        "benchmarks/scale/RESULTS.md's cost table differs from benchmarks/scale/scale.jsonl: run "
        "python benchmarks/scale/scale_report.py --write"
    )


def test_step1_table_is_rendered_from_the_measurements():
    """The table of Step I with the current default comes from benchmarks/scale/step1.jsonl."""
    rep = _report()
    recs = rep.load_step1()
    assert recs and all(r["dag"]["n_edges"] is not None for r in recs)
    assert _block(RESULTS.read_text(), "step1") == rep.step1_table(recs), (
        "benchmarks/scale/RESULTS.md's Step I table differs from benchmarks/scale/step1.jsonl: run "
        "python benchmarks/scale/scale_report.py --write"
    )


def _prose_numbers(text: str) -> list[str]:
    """The numbers of a Markdown text outside code blocks, inline code and link targets."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`]*`", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.findall(r"(?<![\w.])\d[\d,.]*\d|(?<![\w.])\d", text)


def _python_floor() -> str:
    return re.search(r'^requires-python = ">=([0-9.]+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1]


def _low_rank_up_to() -> str:
    from cape_pipeline.causal.algorithms import AUTO_LOW_RANK_MAX

    return str(AUTO_LOW_RANK_MAX)


def _missing_angle() -> str:
    import numpy as np

    from cape_pipeline.encodings import CapeEncodings

    enc = CapeEncodings(np.array(["a"], dtype=object), np.ones((1, 2)), np.full((1, 2), 0.5), np.zeros((1, 3)),
                        np.ones(1))
    (value,) = set(enc.align(["a", "b"], missing="zero")[1])
    return f"{value:g}"


#: each number README.md states in its prose, and where it comes from
README_NUMBERS = {
    "3.10": ("the Python floor, pyproject.toml's requires-python", _python_floor),
    "20": ("Step I's low-rank model up to this many features, algorithms.AUTO_LOW_RANK_MAX", _low_rank_up_to),
    "0": ("the angle of a gene without an encoding, CapeEncodings.align(missing='zero')", _missing_angle),
}


def test_every_number_in_readme_is_checked_against_its_source():
    found = _prose_numbers((ROOT / "README.md").read_text())
    unknown = sorted(set(found) - set(README_NUMBERS))
    assert not unknown, f"README.md states {unknown}: check each against its source in README_NUMBERS"
    for number in set(found):
        what, source = README_NUMBERS[number]
        assert source() == number, f"README.md says {number} for {what}, the source says {source()}"


def test_prose_numbers_skip_code_and_links():
    text = "Python 3.10, `n=5`, [x](a/000.md), pbmc68k and 1,000 cells.\n```bash\nmake 7\n```\n"
    assert _prose_numbers(text) == ["3.10", "1,000"]


def test_every_row_is_a_measured_run():
    rep = _report()
    for r in rep.load():
        assert r["total_seconds"] > 0 and r["peak_rss_mb"] > 0 and len(r["load_before"]) == 3
        assert r["stages"]["discover"]["seconds"] and r["stages"]["train"]["seconds"]


def test_cape_value_task_tables_are_rendered_from_the_runs():
    """The perturbation and age blocks of cape_value/RESULTS.md are the report of the
    committed runs (every arm paired with ``default`` by seed), not hand-edited numbers."""
    rep = _script("cape_value", "tasks_report.py")
    text = (ROOT / "benchmarks" / "cape_value" / "RESULTS.md").read_text()
    for task, spec in rep.TASKS.items():
        raw = rep.HERE / spec.raw
        df = rep.load(raw)
        assert set(df.seed[df.arm == rep.baseline(df)]) and len(set(df.arm)) > 1, f"{raw}: no paired arms"
        block = text.split(f"<!-- {task}: begin -->\n", 1)[1].split(f"\n<!-- {task}: end -->", 1)[0]
        assert block == rep.render(df, rep.rows_of(df, task), task, graphs=raw.parent / "graphs.json"), (
            f"cape_value/RESULTS.md's {task} block differs from {raw}: run "
            f"python benchmarks/cape_value/tasks_report.py {task} --write"
        )
