"""The ``cape`` command line: ``cape datasets``, ``cape run SOURCE``, one subcommand per stage, ``cape params``,
``cape cache`` and ``cape reproduce``.

Bad input ends with one line on stderr naming the file/column/parameter and what was expected,
exit status 2 and no traceback (``--debug`` shows it). Internal errors exit with status 1.

The package: :mod:`~cape_pipeline.cli.run` (``cape run``, the stage commands, ``params``, ``datasets``),
:mod:`~cape_pipeline.cli.cache` (``cape cache``), :mod:`~cape_pipeline.cli.reproduce` (``cape reproduce``)
and ``_common`` (consoles, shared options, logging); this module builds :data:`app` from them and holds
:func:`main`, the entry point that maps errors and signals to exit statuses. Every command imports
the library inside its body, so ``cape --help`` stays fast.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Annotated, Any

import typer

from cape_pipeline._threads import WAIT_POLICY
from cape_pipeline.cli._common import console, out_console
from cape_pipeline.cli.cache import cache_app
from cape_pipeline.cli.reproduce import reproduce_app
from cape_pipeline.cli.run import (
    RUN_STATE,
    STAGE_NAMES,
    datasets_cmd,
    params_cmd,
    run_cmd,
    stage_command,
)
from cape_pipeline.errors import CapeFitError, CapeInputError

__all__ = ["app", "entrypoint", "main"]

OWN_FILE = "cape run my.h5ad --labels cell_type --counts-layer counts --out results/"
"""The own-file example every ``--help`` ends with (or its stage's variant, :data:`EXAMPLES`)."""

EXAMPLES: dict[str, str] = {
    "run": f"Example, your own file: {OWN_FILE} (add --dry-run first for the plan and a time estimate)",
    "ingest": "Example, your own file: cape ingest my.h5ad --labels cell_type --out results/",
    "preprocess": "Example, your own file: cape preprocess my.h5ad --counts-layer counts "
    "--set preprocess.n_top_genes=1000 --out results/",
    "discover": "Example, your own file: cape discover my.h5ad --counts-layer counts --set discover.regression.regulators=human "
    "--out results/",
    "embed": "Example, your own file: cape embed my.h5ad --counts-layer counts --set embed.dim=16 --out results/",
    "encode": "Example, your own file: cape encode my.h5ad --counts-layer counts --out results/",
    "train": "Example, your own file: cape train my.h5ad --labels cell_type --counts-layer counts --out results/",
    "evaluate": "Example, your own file: cape evaluate my.h5ad --labels cell_type --counts-layer counts "
    "--out results/",
    "datasets": f"Example: cape run pbmc68k_reduced --out results/ (a listed dataset); your own file: {OWN_FILE}",
    "params": "Example: cape params discover, then cape run my.h5ad --set discover.regression.min_effect=0.01 --out results/",
}
"""One example per command, shown at the end of its ``--help``."""

app = typer.Typer(
    name="cape",
    help="CAPE: causal DAG -> hyperboloid -> rotary encodings -> transformers, for tabular omics.",
    epilog=f"Your own file: {OWN_FILE}\n\nThe demo: cape run pbmc68k_reduced --out results/\n\n"
    "Every parameter: cape params",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        from cape_pipeline import __version__

        out_console.print(f"cape_pipeline {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    pass


app.command("datasets", epilog=EXAMPLES["datasets"])(datasets_cmd)
app.command("run", epilog=EXAMPLES["run"])(run_cmd)
for _stage in STAGE_NAMES:
    app.command(_stage, epilog=EXAMPLES[_stage])(stage_command(_stage))
app.add_typer(cache_app, name="cache")
app.add_typer(reproduce_app, name="reproduce")
app.command("params", epilog=EXAMPLES["params"])(params_cmd)


class _Stopped(BaseException):
    """Raised in the main thread by the SIGTERM / SIGINT handler (a BaseException, as KeyboardInterrupt,
    so no ``except Exception`` in a stage swallows it; every temporary artifact is removed on the
    way out)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


def _stop_in_chain(exc: BaseException) -> _Stopped | None:
    """The :class:`_Stopped` an exception was raised from or during (``__cause__`` / ``__context__``),
    if any: Python wraps an exception raised inside ``__set_name__`` in a RuntimeError, so a signal
    that lands while a module defines a class arrives wrapped."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, _Stopped):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _stopped_line(signame: str) -> str:
    """One line: which signal stopped which stage, what is kept, how to resume."""
    stage = RUN_STATE["stage"]
    finished = RUN_STATE["finished"]
    where = f"during stage '{stage}'" if stage else "before any stage ran"
    kept = f"; finished and cached: {', '.join(finished)}" if finished else ""
    lost = f"; nothing of '{stage}' was stored" if stage else ""
    return (f"stopped by {signame} {where}{lost}{kept}; rerun the same command to resume from the cache"
            if stage or finished else f"stopped by {signame}")


def _say_stopped(signum: int) -> int:
    """Print :func:`_stopped_line` for ``signum``; the exit status 128 + signum."""
    console.print(f"[red]{_stopped_line(signal.Signals(signum).name)}[/red]", markup=True, highlight=False)
    return 128 + int(signum)


def _click_exceptions() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """(Exit, ClickException, Abort) classes of click and of typer's bundled copy (typer ≥ 0.22
    vendors click as ``typer._click``, whose exceptions are not ``click``'s)."""
    import importlib

    exits: list[type] = [typer.Exit]
    errors: list[type] = []
    aborts: list[type] = [typer.Abort]
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        exits += [c for c in (getattr(mod, "Exit", None),) if isinstance(c, type)]
        errors += [c for c in (getattr(mod, "ClickException", None),) if isinstance(c, type)]
        aborts += [c for c in (getattr(mod, "Abort", None),) if isinstance(c, type)]
    return tuple(exits), tuple(errors), tuple(aborts)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cape`` script; returns the exit status.

    Exit status: 0 success, 2 bad input or usage, 1 internal error, 143 stopped by SIGTERM
    (e.g. a SLURM time limit), 130 stopped by SIGINT (Ctrl-C); a stop prints one line naming
    the signal, the stage it interrupted (nothing of which is stored) and the stages finished.
    """
    exit_exc, click_exc, abort_exc = _click_exceptions()
    # before torch loads its OpenMP runtime, which reads the policy once: idle threads sleep, so
    # several cape processes sharing the cores do not spin against each other (an environment
    # that sets a policy keeps it)
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    RUN_STATE.update(stage=None, finished=[])
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # SIGTERM: SLURM's time limit, torchrun stopping its workers. SIGINT (Ctrl-C) too, unless
        # it is ignored (a background job, nohup): typer would turn its KeyboardInterrupt into
        # a silent return value
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_signal)
    try:
        code = app(args=args, standalone_mode=False, prog_name="cape")
        if isinstance(code, int) and code:  # typer returns the code of a typer.Exit(n) raised in a command
            return code
    except _Stopped as stop:
        return _say_stopped(stop.signum)
    except KeyboardInterrupt:
        return _say_stopped(signal.SIGINT)
    except (CapeInputError, CapeFitError) as exc:  # bad input: 2; a fit that diverged: 1
        if debug:
            raise
        console.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        return 2 if isinstance(exc, CapeInputError) else 1
    except exit_exc as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except click_exc as exc:
        exc.show()
        return exc.exit_code
    except abort_exc as exc:  # click turns a KeyboardInterrupt (SIGINT, Ctrl-C) into Abort
        if isinstance(exc.__context__, KeyboardInterrupt) or RUN_STATE["stage"] or RUN_STATE["finished"]:
            return _say_stopped(signal.SIGINT)
        console.print("aborted")
        return 128 + signal.SIGINT
    except OSError as exc:  # e.g. --out or the workdir removed or made read-only mid-run
        if debug:
            raise
        path = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        console.print(
            f"[red]error:[/red] {exc.strerror or exc}:{path} (a path was removed or made unwritable during the run?); "
            "stages that finished are cached: rerun the same command to resume",
            markup=True, highlight=False,
        )
        return 1
    except Exception as exc:  # noqa: BLE001 - last line of defence for the CLI
        stop = _stop_in_chain(exc)
        if stop is not None:  # the signal came mid-import or inside __set_name__, which wrap it
            return _say_stopped(stop.signum)
        if debug:
            raise
        console.print(f"[red]internal error:[/red] {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def entrypoint() -> None:
    """Console-script wrapper: ``sys.exit(main())``."""
    sys.exit(main())

