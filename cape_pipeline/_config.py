"""What every method config shares: building one from a base config plus keyword options."""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from typing import Any, ClassVar, TypeVar

import numpy as np

from cape_pipeline.errors import CapeConfigError

C = TypeVar("C")


def did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """``" (did you mean 'PREFIXx'?)"`` for the closest of ``known`` to a misspelled
    ``name`` (:func:`difflib.get_close_matches`), or ``""`` when none is close.

    Examples
    --------
    >>> did_you_mean("min_efect", ["min_effect", "fdr"], prefix="discover.regression.")
    " (did you mean 'discover.regression.min_effect'?)"
    """
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def renamed_options(cls: type, options: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``options`` with the earlier names of ``cls``'s fields (its ``renamed`` class attribute,
    ``{old: new}``) replaced by the current ones, each with a :class:`FutureWarning`.

    Raises
    ------
    CapeConfigError
        Both the earlier and the current name are given.
    """
    renamed: Mapping[str, str] = getattr(cls, "renamed", {})
    out = dict(options)
    for old, new in renamed.items():
        if old in out:
            if new in out:
                raise CapeConfigError(f"{what}.{old} is the earlier name of {what}.{new}; give only {new}")
            warnings.warn(f"{what}.{old} is now called {what}.{new}; the earlier name will be removed",
                          FutureWarning, stacklevel=3)
            out[new] = out.pop(old)
    return out


def with_options(cls: type[C], config: C | None, options: dict[str, Any], what: str) -> C:
    """``config`` (default: ``cls()``, every default) with ``options`` replacing its fields; the
    frozen dataclass ``cls`` validates the result in its ``__post_init__``.

    Parameters
    ----------
    cls
        A frozen dataclass config (e.g. :class:`~cape_pipeline.hyperbolic.EmbedConfig`).
    config
        An instance of ``cls`` or None.
    options
        Field name → value; an earlier name of a field (``cls.renamed``) is taken with a
        :class:`FutureWarning`.
    what
        The method's name, for the error message (``embed``, ``encode``).

    Raises
    ------
    TypeError
        ``config`` is not a ``cls``.
    CapeConfigError
        An option is not a field (naming it, the closest field and the known ones), or a value
        is invalid.
    """
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config: expected an {cls.__name__}, got {type(config).__name__}")
    known = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    options = renamed_options(cls, options, what)
    unknown = sorted(set(options) - set(known))
    if unknown:
        hint = "".join(did_you_mean(u, known) for u in unknown)
        raise CapeConfigError(
            f"{what}: unknown option(s) {', '.join(map(repr, unknown))}{hint}; known options: {', '.join(known)}"
        )
    base = config if config is not None else cls()
    return replace(base, **options) if options else base  # type: ignore[type-var]


class FromOptions:
    """Mixin of a frozen dataclass method config: :meth:`from_options` builds one from a base
    config plus keyword options (what ``embed(graph, config, **options)`` does)."""

    _method: ClassVar[str] = "config"

    @classmethod
    def from_options(cls: type[C], config: C | None = None, **options: Any) -> C:
        """``config`` (default: all defaults) with ``options`` replacing its fields.

        Raises
        ------
        TypeError
            ``config`` is of another class.
        CapeConfigError
            If an option is not a field (naming it and the known ones) or a value is invalid.
        """
        return with_options(cls, config, options, getattr(cls, "_method", cls.__name__))


def is_int(v: Any, low: int) -> bool:
    """Whether ``v`` is an integer (not a bool) ≥ ``low``."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= low


def is_num(v: Any, ok: Any) -> bool:
    """Whether ``v`` is a finite number (not a bool) for which ``ok(float(v))`` holds."""
    try:
        return not isinstance(v, bool) and math.isfinite(float(v)) and bool(ok(float(v)))
    except (TypeError, ValueError):
        return False


def check_fields(cfg: Any, checks: Mapping[str, tuple[Any, str]]) -> None:
    """Raise :class:`CapeConfigError` naming the first field of ``cfg`` whose value fails its
    check; ``checks`` maps a field name to ``(predicate, what was expected)``."""
    for key, (ok, what) in checks.items():
        value = getattr(cfg, key)
        if not ok(value):
            raise CapeConfigError(f"{key}: expected {what}, got {value!r}")
