"""Exceptions raised for bad user input.

Every error a user can cause by what they pass in (a file, a column, a parameter) derives from
:class:`CapeInputError`, a :class:`ValueError`. The CLI prints its message as one line and
exits with status 2; Python callers can catch ``ValueError`` as with numpy or scanpy.
"""

from __future__ import annotations


class CapeInputError(ValueError):
    """Bad input: the message names the file, column or parameter and what was expected."""


class CapeDataError(CapeInputError):
    """The data itself is unusable (NaN/inf, non-numeric columns, duplicates, too few rows)."""


class CapeFileError(CapeInputError):
    """A file is missing, unreadable, corrupt or truncated."""


class CapeConfigError(CapeInputError):
    """A stage parameter, config file entry or CLI option is unknown or out of range."""


class CapeFitError(RuntimeError):
    """A fit diverged (NaN/inf loss or parameters, overflow); the message names the parameter to
    change (usually the learning rate) and the value to try."""


class CapeWarning(UserWarning):
    """A result that ran but may not be what the user wants (e.g. a causal graph that leaves most
    features without an edge); the message says what happened and the setting that changes it."""
