"""The commands that run the pipeline (``cape run``, one per stage) and describe it (``cape params``,
``cape datasets``), with their options and shell completions; :mod:`cape_pipeline.cli` registers them."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from cape_pipeline._keys import STAGE_ORDER
from cape_pipeline.cli._common import (
    DebugOpt,
    VerboseOpt,
    WorkdirOpt,
    console,
    out_console,
    set_threads,
    setup_logging,
)
from cape_pipeline.errors import CapeInputError

__all__ = [
    "RUN_STATE", "STAGE_NAMES", "complete_set", "complete_source", "complete_stage", "datasets_cmd", "params_cmd",
    "run_cmd", "stage_command",
]

STAGE_NAMES = STAGE_ORDER
"""The stage commands, in :data:`cape_pipeline._keys.STAGE_ORDER`."""


def complete_source(incomplete: str) -> list[str]:
    """Shell completion of SOURCE: catalog names and data files / directories."""
    from cape_pipeline.io.catalog import load_catalog

    names = [n for n in load_catalog() if n.startswith(incomplete)]
    base = Path(incomplete).expanduser()
    folder, stem = (base, "") if incomplete.endswith("/") else (base.parent, base.name)
    prefix = incomplete[: len(incomplete) - len(stem)]  # what the user typed before the name
    files: list[str] = []
    if folder.is_dir():
        for p in sorted(folder.iterdir()):
            if p.name.startswith(stem) and (p.is_dir() or p.suffix in (".h5ad", ".parquet", ".csv", ".tsv")):
                files.append(prefix + p.name + ("/" if p.is_dir() else ""))
    return names + files


def complete_stage(incomplete: str) -> list[str]:
    """Shell completion of a stage name."""
    return [s for s in STAGE_NAMES if s.startswith(incomplete)]


def complete_set(incomplete: str) -> list[str]:
    """Shell completion of ``--set stage.param=``."""
    from cape_pipeline.pipeline.params import stage_params

    if "." not in incomplete:
        return [f"{s}." for s in complete_stage(incomplete)]
    stage = incomplete.split(".", 1)[0]
    if stage not in STAGE_NAMES:
        return []
    return [f"{stage}.{p.name}=" for p in stage_params(stage) if f"{stage}.{p.name}=".startswith(incomplete)]


SourceArg = Annotated[
    str,
    typer.Argument(
        help="A .h5ad/.parquet/.csv/.tsv file or a catalog name (`cape datasets`).", autocompletion=complete_source
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Copy the exported products of the last stage here.",
                 show_default="none: they stay in --workdir"),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="YAML file {stage: {param: value}}.", show_default="none")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a parameter: stage.param=value (repeatable); `cape params` lists them all.",
        autocompletion=complete_set,
        show_default="none",
    ),
]
LabelsOpt = Annotated[
    str | None,
    typer.Option(
        "--labels",
        help="The obs column (.h5ad) or table column (Parquet/CSV) with the cell labels, e.g. cell_type; "
        "comma-separated for several (the first is the one annotation and clustering predict). "
        "Checked against the file before any stage runs.",
        show_default="none",
    ),
]
CountsLayerOpt = Annotated[
    str | None,
    typer.Option(
        "--counts-layer",
        help="The .h5ad layer with the raw counts, e.g. counts (when X holds log values): preprocess "
        "normalizes it and Step I takes the library sizes and its counting-noise correction from it.",
        show_default="none: counts where X or .raw holds them",
    ),
]
DeviceOpt = Annotated[
    str | None,
    typer.Option("--device", help="cpu, cuda or auto (stages that use torch).",
                 show_default="each stage's own: auto; embed cpu"),
]
SeedOpt = Annotated[
    int | None, typer.Option("--seed", help="Seed for every stage that takes one.", show_default="each stage's own: 0")
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option("--threads", min=1, help="CPU threads for torch.",
                 show_default="this process's share of the CPUs: the smallest of OMP_NUM_THREADS, "
                 "SLURM_CPUS_PER_TASK, the affinity mask and the cgroup quota"),
]
CompareOpt = Annotated[
    str | None,
    typer.Option(
        "--compare",
        help="Train several arms side by side, same budget and seeds: arm=cape,default,none/no-id "
        "(a PE on top of the backbone's gene identity; NAME/no-id without the identity), or "
        "attention=dot,cone-penumbral,cone-umbral,riemann (the same PE under each attention); "
        "pe= is the earlier spelling of arm=",
        show_default="none: train.arm alone",
    ),
]


RUN_STATE: dict[str, Any] = {"stage": None, "finished": []}
"""What the stage reporter last saw, for the one line :func:`cape_pipeline.cli.main` prints when a
signal stops ``cape``."""


def _report(stage: str, rec: Any, event: str) -> None:
    if event == "start":
        RUN_STATE["stage"] = stage
        console.print(f"[bold]▶ {stage}[/bold] running…")
        return
    RUN_STATE["stage"] = None
    RUN_STATE["finished"].append(stage)
    s = rec.summary
    shape = f"  {s['n_obs']} obs × {s['n_vars']} features" if "n_obs" in s else ""
    extra = "".join(f"  {k}={v}" for k, v in s.items() if k not in ("n_obs", "n_vars", "data_fingerprint"))
    if event == "cached":
        console.print(f"[cyan]↺ {stage}[/cyan] cache hit (key {rec.key[:12]}, reused {rec.path}){shape}{extra}")
    else:
        console.print(f"[green]✓ {stage}[/green] done in {rec.seconds:.2f} s (key {rec.key[:12]}){shape}{extra}")


def _check_writable(flag: str, path: Path) -> None:
    """Raise a one-line CapeInputError unless files can be created in ``path`` (or, when it does
    not exist yet, in its nearest existing parent, where it will be created). Checked before any
    stage runs, so a read-only ``--out`` does not fail after hours of work."""
    import tempfile

    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        where = "" if probe == path else f" (it would be created in {probe})"
        raise CapeInputError(
            f"{flag} {path}: cannot write there{where}: {exc.strerror or exc}; give a writable directory"
        ) from None


def _check_out_vs_workdir(out: Path, workdir: Path) -> None:
    """``--out`` must not be the cache or one of its stage directories (one line, exit 2); elsewhere
    inside the workdir it works, with a one-line warning (pruning the cache would not touch it,
    but removing the workdir would)."""
    o, w = out.resolve(), workdir.resolve()
    if o == w or any(o == w / name or (w / name) in o.parents for name in (*STAGE_NAMES, ".locks")):
        raise CapeInputError(
            f"--out {out}: that is the cache (--workdir {workdir}) or one of its stage directories; "
            "give an output directory outside them"
        )
    if w in o.parents:
        console.print(f"[yellow]warning:[/yellow] --out {out} is inside --workdir {workdir}: removing the cache "
                      "removes the outputs too", markup=True, highlight=False)


def _run(
    source: str,
    until: str | None,
    workdir: Path,
    out: Path | None,
    config: Path | None,
    sets: list[str] | None,
    device: str | None,
    seed: int | None,
    verbose: bool,
    compare: str | None = None,
    threads: int | None = None,
    dry_run: bool = False,
    labels: str | None = None,
    counts_layer: str | None = None,
) -> None:
    from cape_pipeline.pipeline.config import data_keys, merge, parse_assignments, read_config_file
    from cape_pipeline.pipeline.runner import plan_pipeline, run_pipeline

    setup_logging(verbose)
    if workdir.exists() and not workdir.is_dir():
        raise CapeInputError(f"--workdir {workdir}: exists and is not a directory; give a directory for the cache")
    if out is not None and out.exists() and not out.is_dir():
        raise CapeInputError(f"--out {out}: exists and is not a directory; give a directory for the exported files")
    if not dry_run:
        _check_writable("--workdir", workdir)
        if out is not None:
            _check_writable("--out", out)
            _check_out_vs_workdir(out, workdir)
    if seed is not None and seed < 0:
        raise CapeInputError(f"--seed {seed}: expected an integer >= 0")
    if device is not None and device not in ("cpu", "cuda", "auto"):
        raise CapeInputError(f"--device {device!r}: expected cpu, cuda or auto")
    set_threads(threads)
    overrides = merge(read_config_file(config) if config else {}, parse_assignments(sets or []),
                      data_keys(labels, counts_layer))
    if compare:
        key, eq, values = compare.partition("=")
        names = [v.strip() for v in values.split(",") if v.strip()]
        key = key.strip()
        if key not in ("arm", "pe", "attention") or not eq or not names:
            raise CapeInputError(
                f"--compare {compare!r}: expected arm=NAME,NAME,... (e.g. arm=cape,default,none/no-id) "
                "or attention=NAME,NAME,... (e.g. attention=dot,cone-penumbral,cone-umbral)"
            )
        if key == "pe":
            warnings.warn("--compare pe=... is now --compare arm=...; the earlier spelling will be removed",
                          FutureWarning, stacklevel=2)
        train = overrides.setdefault("train", {})
        if "pe" in train and "arm" not in train:  # the earlier name of train.arm, replaced below
            warnings.warn("train.pe is now called train.arm; the earlier name will be removed", FutureWarning,
                          stacklevel=2)
            train["arm"] = train.pop("pe")
        if key == "attention":  # the same PE under each attention: cape, cape@cone-umbral, ...
            from cape_pipeline.tasks.arms import Arm

            arm = Arm.parse(str(train.get("arm", "cape")))
            names = [str(arm.with_attention(a)) for a in names]
        overrides["train"]["arm"] = names[0]
        overrides["train"]["compare"] = names[1:]
    if dry_run:
        if until is not None:
            raise CapeInputError("--dry-run plans the whole job; leave out --until")
        for line in plan_pipeline(source, workdir=workdir, overrides=overrides, seed=seed, device=device):
            out_console.print(line, highlight=False, markup=False)
        return
    result = run_pipeline(
        source,
        until=until,
        workdir=workdir,
        overrides=overrides,
        seed=seed,
        device=device,
        out=out,
        progress=True,
        report=_report,
    )
    n_cached = sum(r.cached for r in result.records)
    console.print(
        f"{len(result.records)} stage(s): {len(result.records) - n_cached} ran, {n_cached} from cache"
        f" (workdir {workdir})"
    )
    for p in result.exported:
        out_console.print(f"exported {p}")


def datasets_cmd(debug: DebugOpt = False) -> None:
    """List the datasets of the catalog (data_catalog.yaml)."""
    from cape_pipeline.io.catalog import catalog_path, load_catalog

    out_console.print(f"[bold]datasets[/bold] ({catalog_path()})", highlight=False)
    for e in load_catalog().values():
        where = "bundled, offline" if e.bundled else f"local copy: ${e.path_env} or --set ingest.path=FILE"
        out_console.print(
            f"[bold cyan]{e.name}[/bold cyan]  {e.modality}  ({where})"
            f"  labels: {', '.join(e.labels) or '-'}  tasks: {', '.join(e.tasks) or '-'}",
            highlight=False,
        )
        out_console.print(f"    {e.description}", highlight=False)


def run_cmd(
    source: SourceArg,
    labels: LabelsOpt = None,
    counts_layer: CountsLayerOpt = None,
    workdir: WorkdirOpt = Path("cape_work"),
    out: OutOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Last stage to run.", autocompletion=complete_stage,
                     show_default="evaluate: every stage"),
    ] = None,
    device: DeviceOpt = None,
    seed: SeedOpt = None,
    compare: CompareOpt = None,
    threads: ThreadsOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print the plan (runs × tasks, cells, tokens, width) and a time estimate "
                     "measured on this machine; run nothing but ingest and preprocess.", show_default="off"),
    ] = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Run every stage (or up to --until) on SOURCE, reusing cached results.

    Your own file: cape run my.h5ad --labels cell_type --counts-layer counts
    """
    _run(source, until, workdir, out, config, set_, device, seed, verbose, compare, threads, dry_run,
         labels, counts_layer)


def stage_command(stage: str) -> Any:
    """The command ``cape STAGE``: run the stages up to ``stage``."""

    def cmd(
        source: SourceArg,
        labels: LabelsOpt = None,
        counts_layer: CountsLayerOpt = None,
        workdir: WorkdirOpt = Path("cape_work"),
        out: OutOpt = None,
        config: ConfigOpt = None,
        set_: SetOpt = None,
        device: DeviceOpt = None,
        seed: SeedOpt = None,
        compare: CompareOpt = None,
        threads: ThreadsOpt = None,
        verbose: VerboseOpt = False,
        debug: DebugOpt = False,
    ) -> None:
        _run(source, stage, workdir, out, config, set_, device, seed, verbose, compare, threads, labels=labels,
             counts_layer=counts_layer)

    cmd.__doc__ = (
        f"Run the stages up to {stage} on SOURCE, reusing cached upstream results.\n\n"
        f"Parameters of this stage (--set {stage}.NAME=VALUE): `cape params {stage}`."
    )
    return cmd


def params_cmd(
    stage: Annotated[
        str | None,
        typer.Argument(help="A stage (default: every stage).", autocompletion=complete_stage, show_default=False),
    ] = None,
    debug: DebugOpt = False,
) -> None:
    """List every stage parameter with its default and meaning (set one with --set stage.NAME=VALUE):
    per stage the options a user sets first, then the research settings under "advanced"."""
    from rich.markup import escape
    from rich.table import Table

    from cape_pipeline._config import did_you_mean
    from cape_pipeline.errors import CapeConfigError
    from cape_pipeline.pipeline.params import USER_OPTIONS, stage_params

    if stage is not None and stage not in STAGE_NAMES:
        raise CapeConfigError(
            f"params: stage {stage!r} unknown{did_you_mean(stage, STAGE_NAMES)}; expected one of {', '.join(STAGE_NAMES)}"
        )
    for name in [stage] if stage else STAGE_NAMES:
        params = stage_params(name)
        order = {n: i for i, n in enumerate(USER_OPTIONS.get(name, ()))}
        user = sorted((p for p in params if not p.advanced), key=lambda p: order[p.name])
        advanced = [p for p in params if p.advanced]
        for title, rows in ((f"{name}  (--set {name}.NAME=VALUE)", user),
                            (f"{name}, advanced: research settings", advanced)):
            if not rows:
                continue
            table = Table(title=title, title_justify="left", show_lines=False)
            table.add_column("parameter", style="bold cyan", no_wrap=True)
            table.add_column("default", no_wrap=True)
            table.add_column("type", style="dim")
            table.add_column("meaning")
            for p in rows:
                default = repr(p.default) if isinstance(p.default, str) else str(p.default)
                table.add_row(p.name, escape(default), escape(p.type), escape(p.help))
            out_console.print(table)


