"""One source for the numbers README.md states about cost (issue 29: docs disagreed on the demo).

README's cost table is rendered from ``benchmarks/scale/scale.jsonl`` by
``benchmarks/scale/scale_report.py``; this test fails when someone edits one without the other.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _report():
    spec = importlib.util.spec_from_file_location("scale_report", ROOT / "benchmarks" / "scale" / "scale_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_cost_table_is_rendered_from_the_measurements():
    rep = _report()
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- cost: begin -->\n", 1)[1].split("\n<!-- cost: end -->", 1)[0]
    assert block == rep.cost_table(rep.load()), (
        "README.md's cost table differs from benchmarks/scale/scale.jsonl: run "
        "python benchmarks/scale/scale_report.py --write-readme"
    )


def test_every_row_is_a_measured_run():
    rep = _report()
    for r in rep.load():
        assert r["total_seconds"] > 0 and r["peak_rss_mb"] > 0 and len(r["load_before"]) == 3
        assert r["stages"]["discover"]["seconds"] and r["stages"]["train"]["seconds"]
