"""What every ``benchmarks/scale`` JSON line records besides its results: the load before and
after, the machine, the command and the date; and the append to the ``.jsonl`` file."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def provenance(load_before: tuple[float, ...], *, threads: bool = True) -> dict[str, Any]:
    """``load_before``/``load_after`` (1, 5, 15 min), ``machine`` (with this process's torch
    threads when ``threads``), ``command`` and ``date``."""
    import torch

    machine = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    return {
        "load_before": [round(v, 2) for v in load_before],
        "load_after": [round(v, 2) for v in os.getloadavg()],
        "machine": machine + (f" threads {torch.get_num_threads()}" if threads else ""),
        "command": "python " + " ".join(shlex.quote(x) for x in sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def append(path: Path, rec: dict[str, Any]) -> None:
    """Append ``rec`` as one JSON line to ``path``."""
    with path.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")


def commit() -> str:
    """The short commit of this checkout, ``+dirty`` when ``cape_pipeline/`` has uncommitted
    changes (the code measured is then not that commit's); ``?`` without git."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "cape_pipeline"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"
    return (head.stdout.strip() or "?") + ("+dirty" if dirty else "")
