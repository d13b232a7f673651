"""What every method config shares: building one from a base config plus keyword options."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, ClassVar, TypeVar

from cape_pipeline.errors import CapeConfigError

C = TypeVar("C")


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
        Field name → value.
    what
        The method's name, for the error message (``embed``, ``encode``).

    Raises
    ------
    TypeError
        ``config`` is not a ``cls``.
    CapeConfigError
        An option is not a field (naming it and the known ones), or a value is invalid.
    """
    if config is not None and not isinstance(config, cls):
        raise TypeError(f"config: expected an {cls.__name__}, got {type(config).__name__}")
    known = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise CapeConfigError(
            f"{what}: unknown option(s) {', '.join(map(repr, unknown))}; known options: {', '.join(known)}"
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
