"""Arms: one positional encoding, with or without the backbone's feature identity, under one
attention — the unit the train stage, the CLI's ``--compare`` and the benchmarks compare.

An arm is written ``PE[/no-id][@ATTENTION]``: ``cape``, ``none`` (the backbone's identity alone),
``none/no-id``, ``cape@cone-umbral``. :meth:`Arm.parse` is its only parser; it takes the earlier
name ``default`` of ``none`` with a :class:`FutureWarning`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cape_pipeline.errors import CapeConfigError

__all__ = ["ATTENTION_SEP", "NO_IDENTITY", "Arm"]

NO_IDENTITY = "/no-id"
"""Arm suffix: the backbone without its native feature identity (literal reading of Eq. F.109)."""

ATTENTION_SEP = "@"
"""Arm suffix naming the attention: ``cape@cone-umbral`` (default: ``dot``)."""


@dataclass(frozen=True)
class Arm:
    """One arm of a comparison.

    Attributes
    ----------
    pe
        A positional-encoding name of :data:`cape_pipeline.models.PE_NAMES`.
    identity
        Whether the backbone keeps its native feature identity (False: ``/no-id``, the PE
        replaces the identity, paper 000 Eq. F.109 read literally).
    attention
        An attention of :data:`cape_pipeline.models.attention.ATTENTIONS` (default ``dot``).
    """

    pe: str
    identity: bool = True
    attention: str = "dot"

    @classmethod
    def parse(cls, text: str) -> Arm:
        """``"cape"`` → ``Arm("cape")``; ``"cape/no-id@cone-umbral"`` →
        ``Arm("cape", identity=False, attention="cone-umbral")``.

        ``"default"`` (the earlier name of ``none``) gives ``Arm("none")`` with a
        :class:`FutureWarning`, with the identity even as ``default/no-id`` (the earlier name
        always kept it).

        Raises
        ------
        CapeConfigError
            Unknown PE or attention name (the message names the arm and what was expected).
        """
        from cape_pipeline.models import PE_NAMES
        from cape_pipeline.models.attention import ATTENTIONS
        from cape_pipeline.models.pe import PE_ALIASES, resolve_pe

        head, sep, att = str(text).partition(ATTENTION_SEP)
        att = att if sep else "dot"
        pe, identity = (head[: -len(NO_IDENTITY)], False) if head.endswith(NO_IDENTITY) else (head, True)
        if pe in PE_ALIASES:  # ``default`` switched the backbone's identity on, /no-id or not
            pe, identity = resolve_pe(pe), True
        if pe not in PE_NAMES:
            raise CapeConfigError(
                f"train: pe {text!r} unknown; expected one of {list(PE_NAMES)}, optionally with "
                f"'{NO_IDENTITY}' (no feature identity, the literal reading of Eq. F.109)"
            )
        if att not in ATTENTIONS:
            raise CapeConfigError(f"train: attention {att!r} of arm {text!r} unknown; expected one of {sorted(ATTENTIONS)}")
        return cls(pe, identity, att)

    @classmethod
    def current(cls, text: str) -> str:
        """``text`` with an earlier PE name replaced by the current one (``"default"`` →
        ``"none"``, :meth:`parse`'s rule, with its warning); any other arm string unchanged.

        Raises
        ------
        CapeConfigError
            As :meth:`parse`, for an arm with an earlier PE name.
        """
        from cape_pipeline.models.pe import PE_ALIASES

        head = str(text).partition(ATTENTION_SEP)[0]
        head = head[: -len(NO_IDENTITY)] if head.endswith(NO_IDENTITY) else head
        return str(cls.parse(text)) if head in PE_ALIASES else text

    def with_attention(self, attention: str) -> Arm:
        """The same PE and identity under another attention (checked as by :meth:`parse`)."""
        return Arm.parse(str(replace(self, attention=attention)))

    @property
    def uses_graph(self) -> bool:
        """Whether the arm reads Step I's graph or Step II's angles (CAPE's PEs, APE-tree, the
        Riemannian attention)."""
        return self.pe.startswith("cape") or self.pe == "ape-tree" or self.attention == "riemann"

    def __str__(self) -> str:
        return self.pe + ("" if self.identity else NO_IDENTITY) + (
            "" if self.attention == "dot" else ATTENTION_SEP + self.attention
        )
