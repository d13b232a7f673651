"""Table, log-log slopes and figure of ``scale.jsonl`` (issue 28 item 6).

Writes ``scale.png`` (seconds and peak RSS per stage against cells, log-log) and prints the
Markdown table and the slopes (least squares of log time on log cells over the simulated sizes,
per stage) that ``RESULTS.md`` quotes.

Usage::

    python benchmarks/scale/scale_report.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
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


def main() -> None:
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
            + f"{r['load_before'][0]:.2f} |"
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
