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

from cape_pipeline._utils import atomic_path, hash_array, hash_bytes
from cape_pipeline.errors import CapeDataError, CapeFileError, CapeWarning

EDGE_COLUMNS = ("source", "target", "weight")
#: columns of :attr:`CausalGraph.edge_scores` that ``dag.parquet`` repeats for each DAG edge
EDGE_STAT_COLUMNS = ("score", "qvalue")
DAG_FILE = "dag.parquet"
EDGE_SCORES_FILE = "edge_scores.parquet"
_META_KEY = b"cape.feature_names"
_SCORES_KEY = b"cape.edge_scores"  # in dag.parquet: {"file", "n_rows", "dag_digest"} of its scores file
_DIGEST_KEY = b"cape.dag_digest"  # in edge_scores.parquet: the digest of the DAG it scores


def edge_scores_path(dag_path: str | Path) -> Path:
    """Where :meth:`CausalGraph.write_parquet` puts the scores of the DAG written to ``dag_path``:
    ``edge_scores.parquet`` beside ``dag.parquet``; ``<stem>_edge_scores.parquet`` beside any
    other name (``learned_dag.parquet`` → ``learned_dag_edge_scores.parquet``), so two graphs
    written into one folder under their own names keep their own scores."""
    p = Path(dag_path)
    return p.with_name(EDGE_SCORES_FILE if p.name == DAG_FILE else f"{p.stem}_{EDGE_SCORES_FILE}")


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
        more confident; for ``algorithm="regression"`` the partial R² of ``source`` in the
        regression of ``target`` on its screened candidates), plus method-specific columns
        (``f_stat``, ``qvalue``, ``accepted``, ``n_tests``). Written to ``edge_scores.parquet``
        beside ``dag.parquet`` (:meth:`write_parquet`), so precision–recall curves can be drawn
        from it.

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

    def _digest(self) -> str:
        """Content hash of the DAG (feature names and adjacency) that links ``dag.parquet`` to
        its ``edge_scores.parquet``."""
        return hash_bytes(json.dumps(self.feature_names.astype(str).tolist()), hash_array(self.adjacency))

    def edge_frame(self) -> pd.DataFrame:
        """The table of ``dag.parquet`` (:meth:`write_parquet`): one row per DAG edge.

        Columns ``source``, ``target`` (str) and ``weight`` (float64, the edge's weight); when
        :attr:`edge_scores` is set, also those of :data:`EDGE_STAT_COLUMNS` it has: ``score``
        (float64, the pair's score, larger = more confident) and ``qvalue`` (float64, the pair's
        Benjamini–Hochberg q-value), NaN for an edge the method did not score.
        """
        edges = self.to_frame()
        if self.edge_scores is None:
            return edges
        stats = [c for c in EDGE_STAT_COLUMNS if c in self.edge_scores.columns]
        if not stats:
            return edges
        sc = self.edge_scores[["source", "target", *stats]].astype({"source": str, "target": str})
        sc = sc.drop_duplicates(["source", "target"], keep="first")
        return edges.merge(sc, on=["source", "target"], how="left")

    def edge_scores_frame(self) -> pd.DataFrame | None:
        """The table of ``edge_scores.parquet`` (:meth:`write_parquet`), or None without
        :attr:`edge_scores`: every scored pair, its columns as in :attr:`edge_scores` and
        ``in_dag`` (bool, the pair is an edge of the DAG) last."""
        if self.edge_scores is None:
            return None
        sc = self.edge_scores.reset_index(drop=True)
        edges = self.to_frame()
        key = pd.MultiIndex.from_arrays([sc["source"].astype(str), sc["target"].astype(str)])
        in_dag = key.isin(pd.MultiIndex.from_arrays([edges["source"], edges["target"]]))
        return sc.assign(in_dag=np.asarray(in_dag, dtype=bool))

    def write_parquet(self, path: str | Path) -> None:
        """Write the DAG to ``path`` (``dag.parquet``) and its scored pairs beside it, atomically.

        ``dag.parquet`` holds one row per DAG edge (:meth:`edge_frame`): ``source``, ``target``,
        ``weight`` and, when the method scored pairs, the edge's ``score`` and ``qvalue``. Its
        row count is :attr:`n_edges`; ``networkx.from_pandas_edgelist(pd.read_parquet(path),
        edge_attr="weight", create_using=networkx.DiGraph)`` is the DAG. The full node list
        (isolated nodes included), ``params`` and ``n_cycle_edges_dropped`` are kept in the
        file's schema metadata.

        With :attr:`edge_scores`, every scored pair goes to :func:`edge_scores_path` (
        ``edge_scores.parquet`` beside ``dag.parquet``; :meth:`edge_scores_frame`): ``source``,
        ``target``, ``score`` and the method's statistics, and ``in_dag`` (bool) marking the
        DAG's edges, for precision–recall curves over every pair. Without it, a scores file left
        there by an earlier graph is removed, so the folder never pairs a DAG with another DAG's
        scores. Each file is written to a temporary name and renamed; the scores file first.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        scores_path = edge_scores_path(path)
        digest = self._digest()
        scores = self.edge_scores_frame()
        meta: dict[bytes, bytes] = {
            _META_KEY: json.dumps(self.feature_names.astype(str).tolist()).encode(),
            b"cape.params": json.dumps(self.params, default=str).encode(),
            b"cape.n_cycle_edges_dropped": str(self.n_cycle_edges_dropped).encode(),
        }
        if scores is not None:
            st = pa.Table.from_pandas(scores, preserve_index=False)
            st = st.replace_schema_metadata({**(st.schema.metadata or {}), _DIGEST_KEY: digest.encode()})
            with atomic_path(scores_path) as tmp:
                pq.write_table(st, tmp)
            meta[_SCORES_KEY] = json.dumps(
                {"file": scores_path.name, "n_rows": len(scores), "dag_digest": digest}
            ).encode()
        table = pa.Table.from_pandas(self.edge_frame(), preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        if scores is None:
            scores_path.unlink(missing_ok=True)

    @classmethod
    def read_parquet(cls, path: str | Path) -> CausalGraph:
        """Read a graph written by :meth:`write_parquet` (or any source/target[/weight] Parquet).

        :attr:`edge_scores` comes from the scores file beside ``path`` (:func:`edge_scores_path`)
        when ``path`` names one and the file is there and scores this DAG (otherwise it is None,
        with a :class:`~cape_pipeline.errors.CapeWarning`). A ``dag.parquet`` of the earlier
        layout, which held every scored pair with an ``in_dag`` column, reads as before: the
        DAG is its ``in_dag`` rows and :attr:`edge_scores` every pair the method scored.

        Raises
        ------
        CapeFileError
            If the file is missing or not valid Parquet.
        CapeDataError
            If the columns are wrong.
        """
        path = Path(path)
        if not path.is_file():
            raise CapeFileError(f"{path}: no such file (expected a dag.parquet edge list)")
        table = _read_table(path)
        meta = table.schema.metadata or {}
        names = json.loads(meta[_META_KEY]) if _META_KEY in meta else None
        params = json.loads(meta[b"cape.params"]) if b"cape.params" in meta else {}
        dropped = int(meta.get(b"cape.n_cycle_edges_dropped", b"0"))
        df = table.to_pandas()
        scores = None
        if "in_dag" in df.columns:  # earlier layout: the DAG's edges and every scored pair in one file
            scores = df.drop(columns=["weight", "in_dag"])
            if "score" in scores.columns:  # a DAG edge the method did not score has no score
                scores = scores[scores["score"].notna()]
            scores = scores.reset_index(drop=True)
            df = df[df["in_dag"].astype(bool)]
        elif _SCORES_KEY in meta:
            scores = _read_edge_scores(path, json.loads(meta[_SCORES_KEY]))
        try:
            return cls.from_edges(
                df, feature_names=names, params=params, n_cycle_edges_dropped=dropped, edge_scores=scores
            )
        except CapeDataError as exc:
            raise CapeDataError(f"{path}: {exc}") from exc


def _read_table(path: Path) -> Any:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise CapeFileError(f"{path}: not a readable Parquet file ({exc})") from exc


def _read_edge_scores(dag_path: Path, entry: dict[str, Any]) -> pd.DataFrame | None:
    """The scores that ``dag_path``'s metadata ``entry`` names, without ``in_dag``; None with a
    warning when the file is absent or scores another DAG."""
    import warnings

    scores_path = dag_path.with_name(str(entry.get("file", edge_scores_path(dag_path).name)))
    if not scores_path.is_file():
        warnings.warn(f"{dag_path}: its scored pairs ({scores_path.name}) are not beside it; edge_scores is None",
                      CapeWarning, stacklevel=3)
        return None
    table = _read_table(scores_path)
    digest = (table.schema.metadata or {}).get(_DIGEST_KEY, b"").decode()
    if digest != entry.get("dag_digest"):
        warnings.warn(f"{scores_path}: scores another DAG than {dag_path.name} (left from another run?); "
                      "edge_scores is None", CapeWarning, stacklevel=3)
        return None
    return table.to_pandas().drop(columns="in_dag", errors="ignore")
