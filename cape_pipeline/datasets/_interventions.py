"""Offline data for the perturbation and age tasks: a nonlinear SEM with interventions.

The SEM follows gcastle's ``IIDSimulation(method="nonlinear", sem_type="mlp")`` in spirit (our
own code): a scale-free DAG (Barabási–Albert skeleton oriented along a random order), and for
every node with parents ``z_j = f_j(z_pa(j)) + ε_j`` with ``f_j`` a random one-hidden-layer
sigmoid MLP, rescaled so that ``f_j`` has unit variance under the observational distribution.
An intervention ``do(z_j = c)`` replaces node j's equation by the constant (or a per-sample
vector) and propagates to its descendants through the *same* functions and scalings.

Ancestral sampling loops over nodes in topological order (each step is vectorized over samples).
All randomness comes from a seeded :class:`numpy.random.Generator`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import anndata as ad
import numpy as np
import pandas as pd
import scipy.sparse as sp

from cape_pipeline._keys import parse_condition
from cape_pipeline.datasets._simulate import TRUE_DAG_KEY
from cape_pipeline.errors import CapeConfigError

__all__ = [
    "scale_free_dag",
    "MLPSEM",
    "simulate_perturbation_data",
    "simulate_methylation_age",
    "parse_condition",
    "TRUE_DAG_KEY",
]

def scale_free_dag(n_nodes: int, n_attach: int, rng: np.random.Generator) -> np.ndarray:
    """Random scale-free DAG: preferential attachment, edges from earlier to later nodes.

    Parameters
    ----------
    n_nodes
        M.
    n_attach
        Parents each new node picks (≈ edges per node).
    rng
        Seeded generator.

    Returns
    -------
    ndarray
        ``(M, M)`` 0/1 float, ``B[m, n] = 1`` ⇔ m → n, acyclic; node labels are shuffled so
        the topological order is random.
    """
    b = np.zeros((n_nodes, n_nodes))
    deg = np.ones(n_nodes)
    for j in range(1, n_nodes):
        k = min(n_attach, j)
        p = deg[:j] / deg[:j].sum()
        pa = rng.choice(j, size=k, replace=False, p=p)
        b[pa, j] = 1.0
        deg[pa] += 1
        deg[j] += k
    perm = rng.permutation(n_nodes)
    return b[np.ix_(perm, perm)]


@dataclass
class MLPSEM:
    """A nonlinear additive-noise SEM over a DAG with random MLP mechanisms.

    Build with :meth:`random`; sample with :meth:`sample`.

    Attributes
    ----------
    dag
        ``(M, M)`` 0/1 adjacency, ``[m, n] = 1`` ⇔ m → n.
    order
        A topological order of the nodes.
    w1, w2
        Per-node MLP weights (lists; ``w1[j]`` is ``(|pa(j)|, hidden)``, ``w2[j]`` ``(hidden,)``).
    loc, scale
        Per-node affine rescaling of ``f_j`` (fit on observational samples).
    noise_scale
        Std of the Gaussian noise ε.
    """

    dag: np.ndarray
    order: np.ndarray
    w1: list[np.ndarray]
    w2: list[np.ndarray]
    loc: np.ndarray
    scale: np.ndarray
    noise_scale: float

    @classmethod
    def random(
        cls, dag: np.ndarray, rng: np.random.Generator, *, hidden: int = 16, noise_scale: float = 0.5, n_fit: int = 4000
    ) -> MLPSEM:
        """Random mechanisms over ``dag``; weights ±U(0.5, 2) as in gcastle's MLP SEM."""
        m = dag.shape[0]
        order = _topological_order(dag)
        w1, w2 = [], []
        for j in range(m):
            npa = int(dag[:, j].sum())
            w1.append(rng.uniform(0.5, 2.0, (npa, hidden)) * rng.choice([-1.0, 1.0], (npa, hidden)))
            w2.append(rng.uniform(0.5, 2.0, hidden) * rng.choice([-1.0, 1.0], hidden))
        sem = cls(dag, order, w1, w2, np.zeros(m), np.ones(m), noise_scale)
        sem._fit_scaling(rng, n_fit)
        return sem

    def _mech(self, j: int, z: np.ndarray) -> np.ndarray:
        pa = np.flatnonzero(self.dag[:, j])
        return 1.0 / (1.0 + np.exp(-z[:, pa] @ self.w1[j])) @ self.w2[j]

    def _fit_scaling(self, rng: np.random.Generator, n: int) -> None:
        z = np.zeros((n, self.dag.shape[0]))
        for j in self.order:
            if self.dag[:, j].any():
                f = self._mech(j, z)
                self.loc[j], self.scale[j] = f.mean(), max(f.std(), 1e-6)
                z[:, j] = (f - self.loc[j]) / self.scale[j] + self.noise_scale * rng.standard_normal(n)
            else:
                z[:, j] = rng.standard_normal(n)

    def sample(self, n: int, rng: np.random.Generator, do: dict[int, float | np.ndarray] | None = None) -> np.ndarray:
        """Draw ``n`` samples ``(n, M)``; ``do`` maps node → value (scalar or ``(n,)``)."""
        do = do or {}
        eps = rng.standard_normal((n, self.dag.shape[0]))  # all noise first: same draws with or without do()
        z = np.zeros((n, self.dag.shape[0]))
        for j in self.order:
            if j in do:
                z[:, j] = do[j]
            elif self.dag[:, j].any():
                z[:, j] = (self._mech(j, z) - self.loc[j]) / self.scale[j] + self.noise_scale * eps[:, j]
            else:
                z[:, j] = eps[:, j]
        return z


def _topological_order(dag: np.ndarray) -> np.ndarray:
    """Kahn's order (networkx: the roots by index, then each generation as it frees up)."""
    import networkx as nx

    try:
        return np.fromiter(nx.topological_sort(nx.from_numpy_array(dag, create_using=nx.DiGraph)), dtype=np.int64)
    except nx.NetworkXUnfeasible as exc:
        raise ValueError("graph has a cycle") from exc


def _descendant_counts(dag: np.ndarray) -> np.ndarray:
    import networkx as nx

    g = nx.from_numpy_array(dag, create_using=nx.DiGraph)
    return np.array([len(nx.descendants(g, j)) for j in g])


def _counts_to_expression(z: np.ndarray, base: np.ndarray, gain: float, rng: np.random.Generator) -> np.ndarray:
    """Latent → log1p(Poisson(exp(base + gain·z))) float32 (scRNA-like, with zeros)."""
    rate = np.exp(np.clip(base + gain * z, -10, 8))
    return np.log1p(rng.poisson(rate)).astype(np.float32)


def _dag_uns(dag: np.ndarray, names: list[str]) -> dict[str, object]:
    src, tgt = np.nonzero(dag)
    return {"dag_source": np.asarray(names, dtype=object)[src].astype(str), "dag_target": np.asarray(names, dtype=object)[tgt].astype(str)}


def simulate_perturbation_data(
    n_genes: int = 60,
    *,
    n_single: int = 20,
    n_double: int = 20,
    n_ctrl: int = 600,
    cells_per_condition: int = 40,
    n_attach: int = 2,
    do_value: float = 3.0,
    gain: float = 0.6,
    noise_scale: float = 0.5,
    seed: int = 0,
) -> ad.AnnData:
    """Perturb-seq-like data from interventions on a known nonlinear SEM (GEARS-style layout).

    Control cells are observational samples; each perturbation ``do(z_j = do_value)`` (single)
    or ``do(z_j = z_k = do_value)`` (double) is an intervention on the latent SEM; expression is
    ``log1p(Poisson(exp(base_j + gain · z_j)))``. Single targets are drawn with probability
    ∝ 1 + number of descendants (so most perturbations have downstream effects); doubles are
    pairs of single targets.

    Parameters
    ----------
    n_genes
        M (genes ``g0..g{M-1}``).
    n_single, n_double
        Number of single- and double-gene perturbations.
    n_ctrl
        Control cells.
    cells_per_condition
        Cells per perturbation.
    n_attach
        Parents per node in the scale-free DAG.
    do_value
        Intervention value on the standardized latent scale (+3 ≈ CRISPRa overexpression).
    gain
        Latent → log-rate slope.
    noise_scale
        SEM noise std.
    seed
        Seeds everything (one ``numpy.random.Generator``).

    Returns
    -------
    AnnData
        ``X`` (n_cells, M) float32 log1p expression; ``obs["condition"]`` (``"ctrl"``,
        ``"g3+ctrl"``, ``"g3+g7"``), ``obs["perturbation_kind"]`` (ctrl/single/double);
        ``varp["true_dag"]`` sparse 0/1; ``uns["cape_simulation"]`` with the parameters and
        the DAG as an edge list (``dag_source``, ``dag_target``).

    Raises
    ------
    CapeConfigError
        Too few genes for the requested perturbations, or non-positive sizes.
    """
    if n_genes < 3 or n_single < 1 or n_ctrl < 2 or cells_per_condition < 1 or n_double < 0:
        raise CapeConfigError("simulate_perturbation_data: need n_genes >= 3, n_single >= 1, n_ctrl >= 2, cells_per_condition >= 1")
    if n_single > n_genes:
        raise CapeConfigError(f"simulate_perturbation_data: n_single ({n_single}) > n_genes ({n_genes})")
    pairs_max = n_single * (n_single - 1) // 2
    if n_double > pairs_max:
        raise CapeConfigError(f"simulate_perturbation_data: n_double ({n_double}) > possible pairs ({pairs_max})")
    rng = np.random.default_rng(seed)
    dag = scale_free_dag(n_genes, n_attach, rng)
    sem = MLPSEM.random(dag, rng, noise_scale=noise_scale)
    base = rng.uniform(0.0, 2.0, n_genes)
    names = [f"g{i}" for i in range(n_genes)]
    w = 1.0 + _descendant_counts(dag)
    singles = np.sort(rng.choice(n_genes, size=n_single, replace=False, p=w / w.sum()))
    all_pairs = list(itertools.combinations(singles.tolist(), 2))
    doubles = [all_pairs[i] for i in np.sort(rng.choice(len(all_pairs), size=n_double, replace=False))]
    blocks, conds, kinds = [], [], []
    blocks.append(_counts_to_expression(sem.sample(n_ctrl, rng), base, gain, rng))
    conds += ["ctrl"] * n_ctrl
    kinds += ["ctrl"] * n_ctrl
    for j in singles:
        blocks.append(_counts_to_expression(sem.sample(cells_per_condition, rng, {int(j): do_value}), base, gain, rng))
        conds += [f"{names[j]}+ctrl"] * cells_per_condition
        kinds += ["single"] * cells_per_condition
    for j, k in doubles:
        z = sem.sample(cells_per_condition, rng, {j: do_value, k: do_value})
        blocks.append(_counts_to_expression(z, base, gain, rng))
        conds += [f"{names[j]}+{names[k]}"] * cells_per_condition
        kinds += ["double"] * cells_per_condition
    x = np.vstack(blocks)
    obs = pd.DataFrame(
        {"condition": pd.Categorical(conds), "perturbation_kind": pd.Categorical(kinds, categories=["ctrl", "single", "double"])},
        index=[f"cell{i}" for i in range(x.shape[0])],
    )
    adata = ad.AnnData(X=x, obs=obs, var=pd.DataFrame(index=names))
    adata.varp[TRUE_DAG_KEY] = sp.csr_matrix(dag)
    adata.uns["cape_dataset"] = "simulated-perturbation"
    adata.uns["cape_simulation"] = {
        "kind": "perturbation", "n_genes": n_genes, "n_single": n_single, "n_double": n_double, "n_ctrl": n_ctrl,
        "cells_per_condition": cells_per_condition, "n_attach": n_attach, "do_value": do_value, "gain": gain,
        "noise_scale": noise_scale, "seed": seed, **_dag_uns(dag, names),
    }
    return adata


def simulate_methylation_age(
    n_samples: int = 600,
    n_cpgs: int = 100,
    seed: int = 0,
    *,
    n_clock: int | None = None,
    missing_rate: float = 0.05,
    n_attach: int = 2,
    noise_scale: float = 0.5,
    age_range: tuple[float, float] = (0.0, 90.0),
) -> ad.AnnData:
    """Methylation-like β values whose sites depend on age and on each other through a DAG.

    Age (uniform in ``age_range``) drives ``n_clock`` "clock" CpG sites directly; every site
    also follows the nonlinear SEM over a scale-free DAG (:class:`MLPSEM`), so age effects
    propagate to the clock sites' descendants. The age input of clock site j is
    ``a_j · (age − mid)/half_range`` with ``|a_j| ∈ [1, 2]``; ``β = sigmoid(1.5 · z + offset)``,
    then a ``missing_rate`` fraction of entries is set to NaN.

    Parameters
    ----------
    n_samples
        N.
    n_cpgs
        M (sites ``cg0..cg{M-1}``).
    seed
        Seeds everything.
    n_clock
        Sites that read age directly (default ``max(1, M // 5)``).
    missing_rate
        Fraction of missing β values.

    Returns
    -------
    AnnData
        ``X`` (N, M) float32 β ∈ [0, 1] with NaN; ``obs["age"]`` float (years);
        ``varp["true_dag"]`` sparse 0/1 among CpGs; ``var["clock_site"]`` bool;
        ``uns["cape_simulation"]`` with parameters and the DAG edge list.

    Raises
    ------
    CapeConfigError
        Bad sizes or ``missing_rate`` outside [0, 1).
    """
    if n_samples < 2 or n_cpgs < 2:
        raise CapeConfigError("simulate_methylation_age: need n_samples >= 2 and n_cpgs >= 2")
    if not 0.0 <= missing_rate < 1.0:
        raise CapeConfigError(f"simulate_methylation_age: missing_rate must be in [0, 1), got {missing_rate}")
    n_clock = max(1, n_cpgs // 5) if n_clock is None else int(n_clock)
    if not 1 <= n_clock <= n_cpgs:
        raise CapeConfigError(f"simulate_methylation_age: n_clock must be in [1, {n_cpgs}], got {n_clock}")
    rng = np.random.default_rng(seed)
    dag = scale_free_dag(n_cpgs, n_attach, rng)
    sem = MLPSEM.random(dag, rng, noise_scale=noise_scale)
    lo, hi = age_range
    age = rng.uniform(lo, hi, n_samples)
    a_std = (age - (lo + hi) / 2) / ((hi - lo) / 2)
    clock = np.sort(rng.choice(n_cpgs, size=n_clock, replace=False))
    coef = rng.uniform(1.0, 2.0, n_clock) * rng.choice([-1.0, 1.0], n_clock)
    # clock sites: their own equation plus the age term (shift applied as an additive input)
    z = np.zeros((n_samples, n_cpgs))
    age_term = np.zeros((n_samples, n_cpgs))
    age_term[:, clock] = a_std[:, None] * coef[None, :]
    for j in sem.order:
        if dag[:, j].any():
            z[:, j] = (sem._mech(j, z) - sem.loc[j]) / sem.scale[j]
        z[:, j] += age_term[:, j] + noise_scale * rng.standard_normal(n_samples)
    offset = rng.uniform(-1.5, 1.5, n_cpgs)
    beta = 1.0 / (1.0 + np.exp(-(1.5 * z / max(z.std(), 1e-6) + offset)))
    beta[rng.random(beta.shape) < missing_rate] = np.nan
    names = [f"cg{i}" for i in range(n_cpgs)]
    obs = pd.DataFrame({"age": age.astype(np.float64)}, index=[f"s{i}" for i in range(n_samples)])
    var = pd.DataFrame({"clock_site": np.isin(np.arange(n_cpgs), clock)}, index=names)
    adata = ad.AnnData(X=beta.astype(np.float32), obs=obs, var=var)
    adata.varp[TRUE_DAG_KEY] = sp.csr_matrix(dag)
    adata.uns["cape_dataset"] = "simulated-methylation-age"
    adata.uns["cape_simulation"] = {
        "kind": "methylation-age", "n_samples": n_samples, "n_cpgs": n_cpgs, "n_clock": n_clock,
        "missing_rate": missing_rate, "n_attach": n_attach, "noise_scale": noise_scale,
        "age_range": list(age_range), "seed": seed, **_dag_uns(dag, names),
    }
    return adata
