"""The one writer of RESULTS.md's generated blocks (``<!-- NAME: begin -->`` … ``<!-- NAME: end -->``)."""

from __future__ import annotations

import re
from pathlib import Path


def write_block(path: Path, name: str, text: str) -> None:
    """Put ``text`` between the ``name`` markers of ``path`` (appended with its markers when the
    file has none), written atomically: a temporary file, then a rename."""
    body = path.read_text()
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    block = f"{begin}\n{text}\n{end}"
    if begin in body:
        body = re.sub(re.escape(begin) + ".*" + re.escape(end), lambda _: block, body, flags=re.S)
    else:
        body = body.rstrip() + "\n\n" + block + "\n"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(body)
    tmp.replace(path)
