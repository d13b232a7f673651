"""Table, log-log slopes and figure of ``scale.jsonl``.

Writes ``scale.png`` (seconds and peak RSS per stage against cells, log-log) and prints the
Markdown table and the slopes (least squares of log time on log cells over the simulated sizes,
per stage) that ``RESULTS.md`` quotes.

Usage::

    python benchmarks/scale/scale_report.py                 # table, slopes, scale.png
    python benchmarks/scale/scale_report.py --write         # RESULTS.md's cost and Step I tables
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STAGES = ("ingest", "preprocess", "discover", "embed", "encode", "train", "evaluate")


def load() -> list[dict]:
    recs = [json.loads(ln) for ln in (HERE / "scale.jsonl").read_text().splitlines() if ln.strip()]
    last = {}
    for r in recs:  # the newest record per dataset
        last[r["data"]] = r
    return sorted(last.values(), key=lambda r: (r["data"].startswith("sim"), r["cells"]))


def fmt_s(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v / 60:.1f} min" if v >= 100 else f"{v:.1f} s"


COST_HEADER = (
    "| data | cells × genes | Step I | train | whole job | peak memory | edges kept | load before |\n"
    "|---|---|---|---|---|---|---|---|"
)


def load_cell(r: dict) -> str:
    """The load average before a run, marked when the record notes that the run was not quiet."""
    return f"{r['load_before'][0]:.2f}" + (" (not quiet during the run: other jobs shared the cores)" if r.get("note") else "")


def _name_and_edges(r: dict) -> tuple[str, str]:
    """A row's data name and its "edges kept (share of genes without one)" cell."""
    d = r.get("dag") or {}
    edges = f"{d['n_edges']:,}" if d.get("n_edges") is not None else "–"
    if d.get("isolated_share") is not None:
        edges += f" ({100 * d['isolated_share']:.0f} % of genes without one)"
    name = "pbmc68k_reduced (`make demo`)" if r["data"] == "pbmc68k_reduced" else "simulated counts"
    return name, edges


def cost_table(recs: list[dict]) -> str:
    """The cost table of ``RESULTS.md`` (README links to it), rendered from ``scale.jsonl`` alone.

    One row per dataset (its newest record): the bundled demo (pbmc68k_reduced with its
    workflow config, what ``make demo`` runs) first, then the simulated sizes by cells. RESULTS.md
    holds this text between ``<!-- cost: begin -->`` and ``<!-- cost: end -->``;
    ``tests/test_docs_numbers.py`` checks that it is exactly what this function renders.
    """
    rows = [COST_HEADER]
    for r in recs:
        name, edges = _name_and_edges(r)
        runs = (r.get("plan") or {}).get("runs")
        st = r["stages"]
        rows.append(
            f"| {name} | {r['cells']:,} × {r['genes']:,} | {fmt_s(st.get('discover', {}).get('seconds'))} | "
            f"{fmt_s(st.get('train', {}).get('seconds'))}{f' ({runs} runs)' if runs else ''} | "
            f"**{fmt_s(r['total_seconds'])}** | {r['peak_rss_mb'] / 1024:.1f} GB | {edges} | {load_cell(r)} |"
        )
    return "\n".join(rows)


def load_step1() -> list[dict]:
    """``step1.jsonl`` (Step I alone, ``scale.py --step1-only``): the newest record per dataset,
    the demo first, then by cells."""
    path = HERE / "step1.jsonl"
    if not path.exists():
        return []
    newest = {}
    for ln in path.read_text().splitlines():
        if ln.strip():
            r = json.loads(ln)
            newest[r["data"]] = r
    return sorted(newest.values(), key=lambda r: (r["data"] != "pbmc68k_reduced", r["cells"]))


STEP1_HEADER = (
    "| data | cells × genes | Step I | peak memory | edges kept | algorithm, covariates, splits | load before |\n"
    "|---|---|---|---|---|---|---|"
)


def step1_table(recs: list[dict]) -> str:
    """RESULTS.md's table of Step I alone with the current default, rendered from ``step1.jsonl``
    (between ``<!-- step1: begin -->`` and ``<!-- step1: end -->``; checked by
    ``tests/test_docs_numbers.py``)."""
    rows = [STEP1_HEADER]
    for r in recs:
        d = r.get("dag") or {}
        name, edges = _name_and_edges(r)
        rows.append(
            f"| {name} | {r['cells']:,} × {r['genes']:,} | {fmt_s(r['stages'].get('discover', {}).get('seconds'))} | "
            f"{r['peak_rss_mb'] / 1024:.1f} GB | {edges} | {d.get('support')}, {d.get('covariates_used')}, "
            f"{d.get('n_splits_used') or 1} | "
            f"{load_cell(r)} |"
        )
    return "\n".join(rows)


def _replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}: begin -->\n", f"\n<!-- {name}: end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i] + body + text[j:]


def write_tables(path: Path = HERE / "RESULTS.md") -> None:
    """Replace RESULTS.md's cost block with :func:`cost_table` and its Step I block with
    :func:`step1_table` (atomic write)."""
    text = _replace_block(path.read_text(), "cost", cost_table(load()))
    if "<!-- step1: begin -->" in text:
        text = _replace_block(text, "step1", step1_table(load_step1()))
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main() -> None:
    import sys

    if "--write" in sys.argv:
        write_tables()
        print("wrote the cost and Step I tables of", HERE / "RESULTS.md")
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = load()
    print("| data | cells × genes | " + " | ".join(STAGES) + " | total | peak RSS | edges | isolated | tokens/cell | "
          "pretrain subsampled | load before |")
    print("|" + "---|" * (len(STAGES) + 9))
    for r in recs:
        p = r.get("plan") or {}
        d = r.get("dag") or {}
        iso = d.get("isolated_share")
        print(
            f"| {r['data']} | {r['cells']:,} × {r['genes']:,} | "
            + " | ".join(fmt_s(r["stages"].get(s, {}).get("seconds")) for s in STAGES)
            + f" | **{fmt_s(r['total_seconds'])}** | {r['peak_rss_mb'] / 1024:.2f} GB | {d.get('n_edges')} | "
            + (f"{100 * iso:.0f} %" if iso is not None else "–")
            + f" | {p.get('tokens_median', '–')} | {'yes' if p.get('pretrain_subsampled') else 'no'} | "
            + f"{load_cell(r)} |"
        )
    sims = [r for r in recs if r["data"].startswith("sim")]
    if len(sims) >= 2:
        n = np.log([r["cells"] for r in sims])
        sizes = ", ".join(f"{r['cells']:,}" for r in sims)
        print(f"\nLog-log slopes of seconds against cells (simulated sizes {sizes}):\n")
        for s in (*STAGES, "total"):
            t = [r["total_seconds"] if s == "total" else r["stages"].get(s, {}).get("seconds") for r in sims]
            if all(v for v in t):
                print(f"- {s}: {np.polyfit(n, np.log(t), 1)[0]:.2f}")
        rss = [r["peak_rss_mb"] for r in sims]
        print(f"- peak RSS: {np.polyfit(n, np.log(rss), 1)[0]:.2f}")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    cells = [r["cells"] for r in sims]
    for s in ("discover", "train", "preprocess", "embed", "evaluate"):
        t = [r["stages"].get(s, {}).get("seconds") or np.nan for r in sims]
        axes[0].plot(cells, t, "o-", label=s)
    axes[0].plot(cells, [r["total_seconds"] for r in sims], "k*-", lw=2, label="total")
    axes[0].axhline(20 * 60, color="grey", ls=":", lw=1)
    axes[0].axhline(60 * 60, color="grey", ls="--", lw=1)
    axes[0].text(cells[0] if cells else 1000, 20 * 60 * 1.08, "20 min", color="grey", fontsize=8)
    axes[0].text(cells[0] if cells else 1000, 60 * 60 * 1.08, "60 min", color="grey", fontsize=8)
    axes[0].set(xscale="log", yscale="log", xlabel="cells", ylabel="seconds (2-core CPU)", title="time per stage")
    axes[0].legend(fontsize=8)
    for s in ("discover", "train", "preprocess"):
        axes[1].plot(cells, [r["stages"].get(s, {}).get("peak_rss_mb", np.nan) / 1024 for r in sims], "o-", label=s)
    axes[1].axhline(8, color="grey", ls="--", lw=1)
    axes[1].set(xscale="log", yscale="log", xlabel="cells", ylabel="peak RSS (GB)", title="memory per stage process")
    axes[1].legend(fontsize=8)
    fig.suptitle("cape run with every default on simulated UMI counts (2,000 HVGs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "scale.png", dpi=110)
    print("\nwrote", HERE / "scale.png")


if __name__ == "__main__":
    main()
