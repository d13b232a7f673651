"""The :class:`CausalGraph` container: a weighted DAG over named features.

Convention (paper 000, Eq. 5): ``adjacency[m, n] != 0`` means the edge m → n (m is a parent of n)
with weight ``adjacency[m, n]``. The matrix is always scipy.sparse so that graphs over 20,000
genes never become dense.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._utils import atomic_path
from cape_pipeline.errors import CapeDataError, CapeFileError

EDGE_COLUMNS = ("source", "target", "weight")
_META_KEY = b"cape.feature_names"


def degree(adjacency: Any) -> np.ndarray:
    """``(M,)`` int64 in-degree + out-degree of each node of an ``(M, M)`` sparse adjacency
    (stored entries; 0 = a feature without any edge)."""
    a = sp.csr_array(adjacency)
    m = a.shape[0]
    return (np.diff(a.indptr) + np.bincount(a.indices, minlength=m)[:m]).astype(np.int64)


def _as_names(feature_names: Iterable[Any]) -> np.ndarray:
    names = np.asarray([str(n) for n in feature_names], dtype=object)
    if names.ndim != 1 or names.size == 0:
        raise CapeDataError("feature_names: expected a non-empty 1-D list of feature names")
    uniq, counts = np.unique(names.astype(str), return_counts=True)
    if (counts > 1).any():
        dup = uniq[counts > 1][:5].tolist()
        raise CapeDataError(f"feature_names: duplicate feature names {dup}; names must be unique")
    return names


@dataclass
class CausalGraph:
    """Weighted causal DAG over M named features.

    Attributes
    ----------
    feature_names
        ``(M,)`` object array of str, unique; row/column order of ``adjacency``.
    adjacency
        ``(M, M)`` ``scipy.sparse.csr_array`` of float64; ``adjacency[m, n] != 0`` ⇔ edge m → n
        with that weight (paper 000, Eq. 5: f(X) = f(X)A + Z).
    history
        Training history, one dict per augmented-Lagrangian outer step (keys such as
        ``"elbo"``, ``"h"``, ``"rho"``, ``"alpha"``); empty for a given graph.
    params
        Parameters that produced the graph (method name, rank, threshold, ...).
    n_cycle_edges_dropped
        Edges removed after thresholding to make the output acyclic.
    edge_scores
        Every pair the method scored, not only the DAG's edges (None when it scored none):
        a DataFrame with columns ``source``, ``target`` (str) and ``score`` (float64, larger =
        more confident; for ``support="regression"`` the partial R² of ``source`` in the
        regression of ``target`` on its screened candidates), plus method-specific columns
        (``f_stat``, ``qvalue``, ``accepted``). Written into ``dag.parquet`` beside the DAG
        (:meth:`write_parquet`), so precision–recall curves can be drawn from it.

    Raises
    ------
    CapeDataError
        If names are duplicated or the matrix shape does not match the names.
    """

    feature_names: np.ndarray
    adjacency: sp.csr_array
    history: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    n_cycle_edges_dropped: int = 0
    edge_scores: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        self.feature_names = _as_names(self.feature_names)
        m = self.feature_names.size
        adj = sp.csr_array(self.adjacency, dtype=np.float64)
        if adj.shape != (m, m):
            raise CapeDataError(
                f"adjacency: expected shape ({m}, {m}) to match {m} feature names, got {adj.shape}"
            )
        adj.eliminate_zeros()
        adj.sum_duplicates()
        adj.sort_indices()
        if adj.nnz and not np.isfinite(adj.data).all():
            raise CapeDataError("adjacency: contains NaN or inf weights")
        self.adjacency = adj

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_adjacency(
        cls, adjacency: Any, feature_names: Sequence[str], **kwargs: Any
    ) -> CausalGraph:
        """Build from a dense ``(M, M)`` array or scipy.sparse matrix; ``A[m, n]`` is m → n."""
        return cls(feature_names=np.asarray(feature_names, dtype=object), adjacency=sp.csr_array(adjacency), **kwargs)

    @classmethod
    def from_edges(
        cls,
        edges: pd.DataFrame | Iterable[tuple[Any, ...]],
        feature_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> CausalGraph:
        """Build from an edge list.

        Parameters
        ----------
        edges
            A DataFrame with columns ``source``, ``target`` and optionally ``weight``, or an
            iterable of ``(source, target)`` / ``(source, target, weight)`` tuples; weight
            defaults to 1.0.
        feature_names
            Node order. Defaults to the sorted set of names appearing in ``edges``; nodes with
            no edge must be listed here to be kept.

        Raises
        ------
        CapeDataError
            If an edge names a feature not in ``feature_names``.
        """
        if isinstance(edges, pd.DataFrame):
            df = edges
        else:
            rows = [tuple(e) for e in edges]
            df = pd.DataFrame(
                [(r[0], r[1], r[2] if len(r) > 2 else 1.0) for r in rows], columns=list(EDGE_COLUMNS)
            )
        for col in ("source", "target"):
            if col not in df.columns:
                raise CapeDataError(f"edge list: missing column {col!r} (expected source, target[, weight])")
        src = df["source"].astype(str).to_numpy()
        tgt = df["target"].astype(str).to_numpy()
        w = df["weight"].to_numpy(dtype=np.float64) if "weight" in df.columns else np.ones(len(df))
        if feature_names is None:
            feature_names = sorted(set(src) | set(tgt))
        names = _as_names(feature_names)
        index = pd.Index(names.astype(str))
        si, ti = index.get_indexer(src), index.get_indexer(tgt)
        bad = np.concatenate([src[si < 0], tgt[ti < 0]])
        if bad.size:
            raise CapeDataError(f"edge list: features {sorted(set(bad))[:5]} are not among feature_names")
        m = names.size
        adj = sp.csr_array((w, (si, ti)), shape=(m, m))
        return cls(feature_names=names, adjacency=adj, **kwargs)

    # ------------------------------------------------------------------ views
    @property
    def n_features(self) -> int:
        """Number of nodes M."""
        return int(self.feature_names.size)

    @property
    def n_edges(self) -> int:
        """Number of non-zero entries of the adjacency."""
        return int(self.adjacency.nnz)

    def to_frame(self) -> pd.DataFrame:
        """Edge list with columns ``source``, ``target`` (str) and ``weight`` (float64)."""
        coo = self.adjacency.tocoo()
        return pd.DataFrame(
            {
                "source": self.feature_names[coo.row].astype(str),
                "target": self.feature_names[coo.col].astype(str),
                "weight": coo.data.astype(np.float64),
            }
        )

    def to_networkx(self) -> Any:
        """A ``networkx.DiGraph`` with every feature as a node and edge attribute ``weight``."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self.feature_names.astype(str))
        df = self.to_frame()
        g.add_weighted_edges_from(zip(df["source"], df["target"], df["weight"], strict=True))
        return g

    def degree(self) -> np.ndarray:
        """``(M,)`` int64 in-degree + out-degree of each feature (0: no edge); :func:`degree`."""
        return degree(self.adjacency)

    @classmethod
    def from_anndata(cls, adata: Any, key: str = "cape_dag") -> CausalGraph:
        """The DAG that :func:`cape_pipeline.tl.discover` stored in ``adata.varp[key]``.

        Raises
        ------
        CapeDataError
            ``adata.varp[key]`` is absent (names the function to run first).
        """
        from cape_pipeline.errors import CapeDataError

        if key not in adata.varp:
            raise CapeDataError(
                f"adata.varp[{key!r}] not found: run cape_pipeline.tl.discover(adata) first "
                f"or pass graph_key= (available: {list(adata.varp.keys())})"
            )
        return cls.from_adjacency(adata.varp[key], adata.var_names)

    def is_dag(self) -> bool:
        """True when the directed graph has no cycle (self-loops count as cycles)."""
        from scipy.sparse.csgraph import connected_components

        if (self.adjacency.diagonal() != 0).any():
            return False
        n_comp, _ = connected_components(self.adjacency, directed=True, connection="strong")
        return bool(n_comp == self.n_features)

    def binary(self) -> sp.csr_array:
        """``(M, M)`` int8 sparse 0/1 adjacency (the ``B`` of STYLE.md)."""
        b = self.adjacency.copy()
        b.data = np.ones_like(b.data)
        return b.astype(np.int8)

    def __repr__(self) -> str:
        return (
            f"CausalGraph(n_features={self.n_features}, n_edges={self.n_edges}, "
            f"method={self.params.get('method', 'given')!r})"
        )

    # ------------------------------------------------------------------ I/O
    def save(self, directory: str | Path) -> None:
        """Write the graph into ``directory``: ``dag.parquet`` (:meth:`write_parquet`) and
        ``history.json`` (:attr:`history`), each atomically; the directory is created."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.write_parquet(d / "dag.parquet")
        with atomic_path(d / "history.json") as tmp:
            tmp.write_text(json.dumps(self.history, indent=1, default=float))

    @classmethod
    def load(cls, directory: str | Path) -> CausalGraph:
        """Inverse of :meth:`save` (a directory without ``history.json`` gives an empty history).

        Raises
        ------
        CapeFileError
            ``dag.parquet`` missing or unreadable, or ``history.json`` not valid JSON.
        """
        d = Path(directory)
        graph = cls.read_parquet(d / "dag.parquet")
        hist = d / "history.json"
        if hist.is_file():
            try:
                graph.history = json.loads(hist.read_text())
            except ValueError as exc:
                raise CapeFileError(f"{hist}: not valid JSON ({exc})") from exc
        return graph

    def scored_frame(self) -> pd.DataFrame:
        """The DAG's edges and every scored pair in one table (what :meth:`write_parquet` writes).

        Columns ``source``, ``target``, ``weight`` (the DAG weight; 0 off the DAG) and, when
        :attr:`edge_scores` is set, ``in_dag`` (bool) and the score columns; the DAG's edges come
        first. Without scores this is :meth:`to_frame`.
        """
        edges = self.to_frame()
        if self.edge_scores is None:
            return edges
        sc = self.edge_scores.copy()
        sc["source"] = sc["source"].astype(str)
        sc["target"] = sc["target"].astype(str)
        edges["in_dag"] = True
        both = edges.merge(sc, on=["source", "target"], how="left")
        rest = sc.merge(edges[["source", "target"]], on=["source", "target"], how="left", indicator=True)
        rest = rest[rest["_merge"] == "left_only"].drop(columns="_merge")
        rest.insert(2, "weight", 0.0)
        rest.insert(3, "in_dag", False)
        out = pd.concat([both, rest], ignore_index=True)
        if "accepted" in out.columns:  # a DAG edge the method did not score was not accepted by its test
            out["accepted"] = out["accepted"].astype("boolean").fillna(False).astype(bool)
        return out

    def write_parquet(self, path: str | Path) -> None:
        """Write the edge list (source, target, weight) to Parquet, atomically.

        With :attr:`edge_scores`, the file also holds every scored pair: column ``in_dag`` marks
        the DAG's edges (``pd.read_parquet(p).query("in_dag")`` is the DAG) and ``score`` ranks
        all pairs (:meth:`scored_frame`). The full node list (isolated nodes included),
        ``params`` and ``n_cycle_edges_dropped`` are kept in the file's schema metadata.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.scored_frame(), preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[_META_KEY] = json.dumps(self.feature_names.astype(str).tolist()).encode()
        meta[b"cape.params"] = json.dumps(self.params, default=str).encode()
        meta[b"cape.n_cycle_edges_dropped"] = str(self.n_cycle_edges_dropped).encode()
        table = table.replace_schema_metadata(meta)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)

    @classmethod
    def read_parquet(cls, path: str | Path) -> CausalGraph:
        """Read a graph written by :meth:`write_parquet` (or any source/target[/weight] Parquet).

        Raises
        ------
        CapeFileError
            If the file is missing or not valid Parquet.
        CapeDataError
            If the columns are wrong.
        """
        import pyarrow.parquet as pq

        path = Path(path)
        if not path.is_file():
            raise CapeFileError(f"{path}: no such file (expected a dag.parquet edge list)")
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise CapeFileError(f"{path}: not a readable Parquet file ({exc})") from exc
        meta = table.schema.metadata or {}
        names = json.loads(meta[_META_KEY]) if _META_KEY in meta else None
        params = json.loads(meta[b"cape.params"]) if b"cape.params" in meta else {}
        dropped = int(meta.get(b"cape.n_cycle_edges_dropped", b"0"))
        df = table.to_pandas()
        scores = None
        if "in_dag" in df.columns:  # the DAG's edges and every scored pair (scored_frame)
            scores = df.drop(columns=["weight", "in_dag"])
            if "score" in scores.columns:  # a DAG edge the method did not score has no score
                scores = scores[scores["score"].notna()]
            scores = scores.reset_index(drop=True)
            df = df[df["in_dag"].astype(bool)]
        try:
            return cls.from_edges(
                df, feature_names=names, params=params, n_cycle_edges_dropped=dropped, edge_scores=scores
            )
        except CapeDataError as exc:
            raise CapeDataError(f"{path}: {exc}") from exc
