"""One source for every number the user-facing texts state.

The cost tables of ``benchmarks/scale/RESULTS.md`` (README links to them) are rendered from
``benchmarks/scale/scale.jsonl`` and ``step1.jsonl`` by ``benchmarks/scale/scale_report.py``; these
tests fail when someone edits one without the other.
"""

from __future__ import annotations

import importlib.util
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


def test_every_row_is_a_measured_run():
    rep = _report()
    for r in rep.load():
        assert r["total_seconds"] > 0 and r["peak_rss_mb"] > 0 and len(r["load_before"]) == 3
        assert r["stages"]["discover"]["seconds"] and r["stages"]["train"]["seconds"]


def test_cape_value_task_tables_are_rendered_from_the_runs():
    """issue 31: the perturbation and age blocks of cape_value/RESULTS.md are the report of the
    committed runs (every arm paired with ``default`` by seed), not hand-edited numbers."""
    rep = _script("cape_value", "tasks_report.py")
    text = (ROOT / "benchmarks" / "cape_value" / "RESULTS.md").read_text()
    for task, spec in rep.TASKS.items():
        raw = rep.HERE / spec.raw
        df = rep.load(raw)
        assert set(df.seed[df.arm == "default"]) and len(set(df.arm)) > 1, f"{raw}: no paired arms"
        block = text.split(f"<!-- {task}: begin -->\n", 1)[1].split(f"\n<!-- {task}: end -->", 1)[0]
        assert block == rep.render(df, rep.rows_of(df, task), task, graphs=raw.parent / "graphs.json"), (
            f"cape_value/RESULTS.md's {task} block differs from {raw}: run "
            f"python benchmarks/cape_value/tasks_report.py {task} --write"
        )
