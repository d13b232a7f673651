"""``cape cache list | verify | prune``: see and manage the cache of a work directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cape_pipeline.cli._common import DebugOpt, WorkdirOpt, out_console
from cape_pipeline.errors import CapeInputError

if TYPE_CHECKING:
    from cape_pipeline.pipeline.cache import ArtifactCache

cache_app = typer.Typer(
    help="See and manage the cache (--workdir): list, verify, prune.", no_args_is_help=True, add_completion=False
)


def _open(workdir: Path) -> ArtifactCache:
    """The cache under ``workdir``, or a one-line error when there is none."""
    from cape_pipeline.pipeline.cache import ArtifactCache

    if not workdir.is_dir():
        raise CapeInputError(f"--workdir {workdir}: no such directory (no cache there yet)")
    return ArtifactCache(workdir)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def _parse_size(text: str) -> int:
    import re

    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)B?\s*", text.upper())
    if not m:
        raise CapeInputError(f"--max-size {text!r}: expected a size such as 500M or 20G")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " "))


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} d"


@cache_app.command("list", epilog="Example: cape cache list --workdir cape_work")
def cache_list_cmd(workdir: WorkdirOpt = Path("cape_work"), debug: DebugOpt = False) -> None:
    """Every artifact: stage, key, dataset, size, age, last used, whether this code can still use it."""
    import time

    from cape_pipeline.pipeline.cache import stale_temporaries

    entries = _open(workdir).entries()
    now = time.time()
    out_console.print(f"cache {workdir}: {len(entries)} artifact(s), {_size(sum(e.size_bytes for e in entries))}",
                      highlight=False)
    rows = [("stage", "key", "dataset", "size", "created (UTC)", "last used", "usable")]
    rows += [
        (e.stage, e.key[:12], e.source, _size(e.size_bytes), e.created.replace("T", " ").rstrip("Z"),
         f"{_age(now - e.last_used)} ago", "yes" if e.current_code else "no (other code)")
        for e in entries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:  # plain aligned columns: readable in a terminal, a batch log or `| grep`
        out_console.print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), highlight=False, markup=False)
    stale = stale_temporaries(workdir)
    if stale:
        out_console.print(f"{len(stale)} stale temporary file(s) from killed runs: `cape cache prune --yes` removes them")


@cache_app.command("verify", epilog="Example: cape cache verify --workdir cape_work")
def cache_verify_cmd(workdir: WorkdirOpt = Path("cape_work"), debug: DebugOpt = False) -> None:
    """Check every artifact's checksums; exit 1 if any is corrupt (one line each)."""
    cache = _open(workdir)
    bad = 0
    entries = cache.entries()
    for e in entries:
        ok, why = cache.verify(e.stage, e.key)
        if not ok:
            bad += 1
            out_console.print(f"corrupt: {e.stage}/{e.key} ({why}); a run recomputes it, `cape cache prune` can remove it",
                              highlight=False)
    out_console.print(f"{len(entries) - bad} of {len(entries)} artifact(s) verified", highlight=False)
    if bad:
        raise typer.Exit(1)


@cache_app.command("prune", epilog="Example: cape cache prune --older-than 30 --max-size 20G (lists what would go; add --yes to remove)")
def cache_prune_cmd(
    workdir: WorkdirOpt = Path("cape_work"),
    older_than: Annotated[
        float | None, typer.Option("--older-than", help="Remove artifacts not used for this many days.", show_default="none")
    ] = None,
    max_size: Annotated[
        str | None, typer.Option("--max-size", help="Then remove the least recently used until the cache fits, e.g. 20G.",
                                  show_default="none")
    ] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Remove the artifacts of this dataset (source).",
                                                             show_default="none")] = None,
    stale_code: Annotated[
        bool, typer.Option("--stale-code", help="Remove artifacts made by other code (no run can use them).",
                           show_default="off")
    ] = False,
    out: Annotated[
        list[Path] | None, typer.Option("--out", help="Also sweep stale temporary files from this output directory.",
                                         show_default="none")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Remove; without it, only list what would go (dry run).",
                                                show_default="off")] = False,
    debug: DebugOpt = False,
) -> None:
    """Remove artifacts by age, size budget, dataset or code; sweep temporary files of killed runs
    (older than an hour). A dry run unless --yes."""
    import shutil

    from cape_pipeline.pipeline.cache import stale_temporaries

    cache = _open(workdir)
    chosen = cache.select_prune(
        older_than_days=older_than, max_bytes=_parse_size(max_size) if max_size else None,
        source=dataset, stale_code=stale_code,
    )
    temps = [p for root in (workdir, *(out or [])) for p in stale_temporaries(root)]
    verb = "removed" if yes else "would remove"
    for e in chosen:
        if yes:
            cache.remove(e)
        out_console.print(f"{verb} {e.stage}/{e.key[:12]}  {e.source}  {_size(e.size_bytes)}", highlight=False)
    for p in temps:
        if yes:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        out_console.print(f"{verb} temporary {p}", highlight=False)
    freed = sum(e.size_bytes for e in chosen)
    out_console.print(
        f"{verb} {len(chosen)} artifact(s) ({_size(freed)}) and {len(temps)} temporary file(s)"
        + ("" if yes else "; add --yes to remove them"),
        highlight=False,
    )
