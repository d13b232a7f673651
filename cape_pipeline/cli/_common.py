"""What the ``cape`` command and its sub-apps share: the two consoles, the common options and the logging setup."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler

console = Console(stderr=True, soft_wrap=True)
"""Messages, progress and errors (stderr)."""
out_console = Console(soft_wrap=True)
"""Results a user may pipe on (stdout)."""

WorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Cache directory for stage artifacts.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.", show_default="off")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log INFO messages.", show_default="off: warnings only")]


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_time=False, show_path=False)],
        force=True,
    )
    plan = logging.getLogger("cape_pipeline.plan")  # the train plan: always shown, one line each, unwrapped
    plan.setLevel(logging.INFO)
    plan.handlers = [_PlainLines()]
    plan.propagate = False
    # a corrupt artifact, waiting for another run computing the same stage: one unwrapped line each
    cache = logging.getLogger("cape_pipeline.pipeline.cache")
    cache.setLevel(logging.INFO)
    cache.handlers = [_PlainLines()]
    cache.propagate = False


class _PlainLines(logging.Handler):
    """Log records as plain, unwrapped lines on the CLI's stderr console (resolved at each
    write, so a handler kept past ``main()`` never writes to a closed stream)."""

    def emit(self, record: logging.LogRecord) -> None:
        prefix = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        console.print(prefix + record.getMessage(), soft_wrap=True, markup=False, highlight=False)


def set_threads(threads: int | None) -> int:
    """Set torch's CPU threads for this ``cape`` process: ``threads`` (``--threads``) or, by
    default, the process's share of the machine (:func:`cape_pipeline._threads.cpu_share`: the
    smallest of ``OMP_NUM_THREADS``, ``SLURM_CPUS_PER_TASK``, the affinity mask and the cgroup
    CPU quota). Logs the count and its source (``-v``); returns the count.

    The application, not the library, sets torch's global state: the Python API leaves it alone.
    """
    import torch

    from cape_pipeline._threads import cpu_share

    n, source = (threads, "--threads") if threads is not None else cpu_share()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    logging.getLogger("cape_pipeline.cli").info("torch threads %d (%s)", n, source)
    return n
