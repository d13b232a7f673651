"""Package version, read once from the installed metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cape_pipeline")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.1.0+unknown"
