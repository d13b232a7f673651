"""``cape reproduce fig3 | figS2 | figS3``: figures of paper 000 redrawn with this package's code."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cape_pipeline.cli._common import DebugOpt, VerboseOpt, out_console, setup_logging

reproduce_app = typer.Typer(help="Reproduce figures of paper 000 with this package's code.", no_args_is_help=True)


def _show(table: Any, rec: dict[str, Any]) -> None:
    """Print a figure's summary table and the files it wrote."""
    out_console.print(table)
    for path in rec["files"].values():
        out_console.print(f"wrote {path}", highlight=False)


@reproduce_app.command("fig3", epilog="Example: cape reproduce fig3 --out figures/")
def reproduce_fig3_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for the figures, fig3_coordinates.csv and fig3.json.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the graph, the data and Steps I-II.")] = 0,
    n_samples: Annotated[int, typer.Option("--n-samples", help="N, simulated observations (paper: 5000).")] = 5000,
    epochs: Annotated[
        int | None, typer.Option("--epochs", help="Step I epochs.", show_default="the library's rule: >= 5000 steps")
    ] = None,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Fig. 3: 10-node BA DAG, MLP SEM data, learned DAG (Step I), its Poincaré ball P^3 (Step II)."""
    from rich.table import Table

    from cape_pipeline.paper import reproduce_fig3

    setup_logging(verbose)
    rec = reproduce_fig3(out, n_samples=n_samples, seed=seed, epochs=epochs, progress=True)
    sp, spc = rec["spearman_norm_vs_neg_pagerank"], rec["spearman_norm_vs_neg_pagerank_connected"]
    table = Table(title=f"Fig. 3 (seed {rec['seed']}, N = {rec['n_samples']})", show_header=False)
    for key, value in [
        ("edges true / learned", f"{rec['n_true_edges']} / {rec['n_learned_edges']}"),
        ("SHD", str(rec["shd"])),
        ("F1 / skeleton F1", f"{rec['f1']:.3f} / {rec['skeleton_f1']:.3f}"),
        ("Spearman(‖e‖, −PageRank)", "n/a" if sp["rho"] is None else f"{sp['rho']:.3f} (p = {sp['p_value']:.3g})"),
        (
            f"  same, {spc['n_nodes']} nodes with an edge",
            "n/a" if spc["rho"] is None else f"{spc['rho']:.3f} (p = {spc['p_value']:.3g})",
        ),
        ("runtime", ", ".join(f"{k} {v:.1f} s" for k, v in rec["runtime_s"].items())),
    ]:
        table.add_row(key, value)
    _show(table, rec)


@reproduce_app.command("figS2", epilog="Example: cape reproduce figS2 --out figures/")
def reproduce_figs2_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for figS2_bound_surface.png, figS2_bound.csv and figS2.json.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of q, k ~ N(0, I_D) and the pair directions.")] = 0,
    n_distance: Annotated[int, typer.Option("--n-distance", help="Grid points of Poincaré distance in [1, 5].")] = 81,
    n_norm: Annotated[int, typer.Option("--n-norm", help="Grid points of the norm r in [0.01, 0.99].")] = 99,
    dim: Annotated[int, typer.Option("--dim", help="D, even (paper: 128, so d = 64).")] = 128,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Fig. S2: upper bound A+ of the attention score over Poincaré distance x norm (Props. 4.1, 4.2)."""
    from rich.table import Table

    from cape_pipeline.paper import reproduce_figS2

    setup_logging(verbose)
    rec = reproduce_figS2(out, seed=seed, n_distance=n_distance, n_norm=n_norm, dim=dim)
    table = Table(title=f"Fig. S2 (seed {rec['seed']}, D = {rec['dim']})", show_header=False)
    lo, hi = rec["a_plus_range"]
    table.add_row("A+ range", f"{lo:.4f} .. {hi:.4f} (relative variation {rec['relative_variation']:.2e})")
    for key, name in [("monotonic_in_distance", "decreasing in distance"), ("monotonic_in_generality", "decreasing in generality")]:
        rep = rec[key]["all"]
        table.add_row(name, f"{rep['fraction_decreasing']:.4f} of {rep['n_steps']} steps ({rep['n_not_decreasing']} not)")
    table.add_row("feasible cells / |A| <= A+", f"{rec['feasible_fraction']:.3f} / {rec['bound_holds']}")
    table.add_row("runtime", ", ".join(f"{k} {v:.1f} s" for k, v in rec["runtime_s"].items()))
    _show(table, rec)


@reproduce_app.command("figS3", epilog="Example: cape reproduce figS3 --out figures/")
def reproduce_figs3_cmd(
    out: Annotated[Path, typer.Option("--out", help="Directory for figS3_bias.png, figS3_xi.csv, figS3_stats.csv and figS3.json.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of q, k, the pair e_m, e_n and the noise.")] = 0,
    sigma: Annotated[
        list[float] | None, typer.Option("--sigma", help="Noise sd, repeatable.", show_default="0.1 0.2 0.3")
    ] = None,
    n_max: Annotated[int, typer.Option("--n-max", help="Largest N, number of noise pairs (paper: 100).")] = 100,
    repeats: Annotated[int, typer.Option("--repeats", help="T, repetitions per N (paper: 100).")] = 100,
    dim: Annotated[int, typer.Option("--dim", help="D, even (paper: 128).")] = 128,
    noise: Annotated[str, typer.Option("--noise", help="'angle' (noise on φ) or 'position' (noise on e).")] = "angle",
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Fig. S3: average attention bias ξ_N against N under Gaussian positional noise (Prop. A.10)."""
    from rich.table import Table

    from cape_pipeline.paper import reproduce_figS3

    setup_logging(verbose)
    rec = reproduce_figS3(
        out, seed=seed, sigma=tuple(sigma) if sigma else (0.1, 0.2, 0.3), n_max=n_max, repeats=repeats, dim=dim, noise=noise
    )
    table = Table(title=f"Fig. S3 (seed {rec['seed']}, N <= {rec['n_max']}, T = {rec['repeats']})")
    for col in ("σ", "sd of ξ_N, first → last tenth of N", "slope of log sd", "shrinks", "pooled mean", "E(ξ_N), Eq. A.101"):
        table.add_column(col)
    for p in rec["per_sigma"]:
        slope = "n/a" if p["sd_slope_loglog"] is None else f"{p['sd_slope_loglog']:.3f}"
        table.add_row(
            f"{p['sigma']:g}", f"{p['sd_first']:.3f} → {p['sd_last']:.3f}", slope,
            str(p["spread_shrinks"]), f"{p['pooled_mean']:.4f}", f"{p['expected_bias']:.4f}",
        )
    _show(table, rec)
