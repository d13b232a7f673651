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
    cache = logging.getLogger("cape_pipeline.pipeline.cache")  # a corrupt artifact: one unwrapped line
    cache.setLevel(logging.INFO if verbose else logging.WARNING)
    cache.handlers = [_PlainLines()]
    cache.propagate = False


class _PlainLines(logging.Handler):
    """Log records as plain, unwrapped lines on the CLI's stderr console (resolved at each
    write, so a handler kept past ``main()`` never writes to a closed stream)."""

    def emit(self, record: logging.LogRecord) -> None:
        prefix = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        console.print(prefix + record.getMessage(), soft_wrap=True, markup=False, highlight=False)
