"""The evaluate report's figures: paired differences, training curves, confusion matrices, UMAPs."""

from __future__ import annotations

from typing import Any

import numpy as np

from cape_pipeline.report.power import arm_of


def report_figures(
    train: Any, adata: Any, comparison: dict[str, Any], primary: list[dict[str, Any]], *, umap: bool = True,
    progress: bool = False, encode: Any = None,
) -> dict[str, Any]:
    """The report's figures by file name: ``loss.png`` (with ``encode``: Step I, Step II and the
    transformers' masked-value pretraining, first seed of each arm, in pipeline order;
    :func:`cape_pipeline.pl.curves.plot_training_curves`), ``cape_vs_none.png`` (:func:`plot_differences`),
    ``forest.png`` (every arm against the baseline, :func:`cape_pipeline.pl.forest.forest_plot`,
    when more than one arm was compared with it),
    ``curves_<task>.png`` (training and validation loss per epoch, first seed of each arm),
    ``confusion_<task>_<arm>.png`` (row-normalized, test cells) and, with ``umap``,
    ``umap_<arm>.png`` (scanpy UMAP of the clustering embeddings colored by label).

    Parameters
    ----------
    train
        :class:`cape_pipeline.tasks.TrainOutput`.
    adata
        The preprocessed AnnData the runs used (labels for the UMAP colors).
    comparison
        The report's comparison (``arm``, ``baseline``, ``differences``).
    primary
        The rows of ``comparison["differences"]`` to draw in ``cape_vs_none.png``.
    encode
        The encode stage's output (``embed_loss``, ``discover_history``, ``encodings.graph``), or
        None: no ``loss.png``.
    progress
        Show progress over the UMAPs (the slow part on tens of thousands of cells).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    figs: dict[str, Any] = {}
    first: dict[tuple[str, str], Any] = {}
    for r in train.results:
        first.setdefault((r.task, arm_of(r.params)), r)
    if encode is not None:
        from cape_pipeline.pl.curves import plot_training_curves

        task = next((t for t in train.tasks if any(tt == t and r.curves.get("pretrain_loss")
                                                   for (tt, _), r in first.items())), None)
        pre = {pe: r.curves["pretrain_loss"] for (t, pe), r in first.items() if t == task and r.curves.get("pretrain_loss")}
        seed = next((r.params.get("seed", 0) for (t, _), r in first.items() if t == task), 0)
        figs["loss.png"] = plot_training_curves(
            getattr(encode, "embed_loss", None) or [], getattr(encode, "discover_history", None) or [],
            graph=encode.encodings.graph, training=pre or None,
            training_title=f"Transformers: masked-value pretraining\n({task}, seed {seed}; MSE of hidden values)")
    fig = plot_differences(train, comparison, primary)
    if fig is not None:
        figs["cape_vs_none.png"] = fig
    if len({r["arm"] for r in comparison.get("arms") or []}) > 1:  # more than the lead arm: a forest plot
        from cape_pipeline.pl.forest import forest_plot

        figs["forest.png"] = forest_plot(comparison["arms"], title="Every arm against "
                                         f"{comparison['baseline']}: paired differences")
    # training curves: per task, masked-value pretraining and fine-tuning in panels of their
    # own (their losses differ in kind and scale); one color per arm, a line style per arm too
    # so arms that overlap stay distinguishable
    styles = ["-", "--", ":", "-."]
    for task in train.tasks:
        runs = [(pe, r) for (t, pe), r in first.items() if t == task and r.curves]
        if not runs:
            continue
        panels = [(k, title) for k, title in (("pretrain_loss", "masked-value pretraining (MSE of hidden values)"),
                                               ("finetune_loss", "fine-tuning: training loss"),
                                               ("val_score", "fine-tuning: validation loss"))
                  if any(r.curves.get(k) for _, r in runs)]
        if not panels:
            continue
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
        for ax, (key, title) in zip(axes[0], panels, strict=True):
            for i, (pe, r) in enumerate(runs):
                vals = np.asarray(r.curves.get(key) or [], dtype=float)
                if vals.size:
                    vals = -vals if key == "val_score" else vals  # the score is minus the validation loss
                    ax.plot(np.arange(1, vals.size + 1), vals, ls=styles[i % len(styles)], lw=1.4,
                            color=plt.cm.tab10(i % 10), label=pe)
            ax.set_xlabel("epoch")
            ax.set_ylabel("loss")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7, title="arm", title_fontsize=7)
        fig.suptitle(f"{task}: training curves (seed {train.results[0].params.get('seed', 0)})", fontsize=10)
        fig.tight_layout()
        figs[f"curves_{task}.png"] = fig
    # confusion matrices (annotation)
    for (task, pe), r in first.items():
        if r.confusion is None:
            continue
        cm = r.confusion.to_numpy(dtype=float)
        cm = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
        fig, ax = plt.subplots(figsize=(5.5, 5))
        im = ax.imshow(cm, cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(r.confusion.columns)), [str(c) for c in r.confusion.columns], rotation=90, fontsize=7)
        ax.set_yticks(range(len(r.confusion.index)), [str(c) for c in r.confusion.index], fontsize=7)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        counts = r.confusion.to_numpy(dtype=float)
        if cm.shape[0] <= 25:  # the counts in each cell (white on dark)
            for (i, j), n in np.ndenumerate(counts):
                if n:
                    ax.text(j, i, f"{int(n)}", ha="center", va="center", fontsize=6,
                            color="white" if cm[i, j] > 0.5 else "black")
        ax.set_title(f"{task}, pe={pe}: confusion (color: row share; numbers: test cells)", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046, label="share of the true class")
        figs[f"confusion_{task}_{pe.replace('/', '-')}.png"] = fig
    # UMAP of cell embeddings, colored by label
    if umap:
        figs.update(_umaps(first, adata, progress=progress))
    return figs


def plot_differences(train: Any, comp: dict[str, Any], rows: list[dict[str, Any]]) -> Any:
    """Per-seed paired differences arm − baseline (``comp["arm"]``, ``comp["baseline"]``) of the
    metrics in ``rows`` (one row each: task, metric, mean, ci_low, ci_high, higher_is_better),
    with their interval (at the row's ``level`` where given: the verdict's Bonferroni-adjusted
    one); None when ``rows`` is empty."""
    import matplotlib.pyplot as plt

    if not rows:
        return None
    runs = {(r.task, arm_of(r.params), r.params.get("seed")): r.metrics for r in train.results}
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.45 * len(rows)))
    for i, row in enumerate(rows):
        seeds = sorted(s for t, a, s in runs if t == row["task"] and a == comp["arm"])
        pts = [runs[(row["task"], comp["arm"], s)][row["metric"]] - runs.get((row["task"], comp["baseline"], s), {}).get(row["metric"], np.nan) for s in seeds]
        ax.scatter(pts, [i] * len(pts), s=14, color="0.5", zorder=2)
        if row["ci_low"] is not None:
            ax.plot([row["ci_low"], row["ci_high"]], [i, i], color="C0", lw=2, zorder=1)
        ax.scatter([row["mean"]], [i], marker="D", color="C0", zorder=3)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(rows)), [f"{r['task']} {r['metric']}" + ("" if r["higher_is_better"] else " (lower better)") for r in rows], fontsize=8)
    levels = sorted({float(r.get("level", 0.95)) for r in rows})
    what = (f"{100 * levels[0]:.4g} % interval each (Bonferroni: 95 % for the {len(rows)} together)"
            if levels == [1 - 0.05 / len(rows)] and len(rows) > 1 else "95 % interval")
    ax.set_xlabel(f"{comp['arm']} − {comp['baseline']} (grey: per seed; diamond: mean; bar: {what})", fontsize=8)
    ax.set_title("Does CAPE help on this data?")
    return fig


def _umaps(first: dict[tuple[str, str], Any], adata: Any, *, progress: bool = False) -> dict[str, Any]:
    from cape_pipeline._progress import progress_task

    figs = {}
    todo = [(pe, r) for (task, pe), r in first.items()
            if task == "clustering" and r.embeddings is not None and r.embeddings.shape[0] == adata.n_obs]
    with progress_task("UMAP of the cell embeddings", len(todo), unit="arms", show=progress and bool(todo)) as bar:
        for pe, r in todo:
            figs[f"umap_{pe.replace('/', '-')}.png"] = _umap_figure(pe, r, adata)
            bar.update(advance=1)
    return figs


def _umap_figure(pe: str, r: Any, adata: Any) -> Any:
    """One arm's UMAP figure: umap-learn (scanpy's defaults: 15 neighbours, min_dist 0.5, seed 0)
    of its clustering embeddings, colored by label. umap-learn directly, not
    ``sc.pp.neighbors`` + ``sc.tl.umap``: scanpy 1.11's neighbours call ``csr_array.getnnz``,
    which scipy 1.17 removed, above 4,096 cells."""
    import warnings

    import anndata as ad
    import matplotlib.pyplot as plt
    import umap

    label = r.params.get("label_key")
    emb = ad.AnnData(X=np.zeros((adata.n_obs, 1), dtype=np.float32), obs=adata.obs.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emb.obsm["X_umap"] = umap.UMAP(n_neighbors=min(15, max(adata.n_obs - 1, 2)), min_dist=0.5, random_state=0,
                                       n_jobs=1).fit_transform(np.asarray(r.embeddings, dtype=np.float32))
    xy = emb.obsm["X_umap"]
    fig, ax = plt.subplots(figsize=(6, 5))
    if label in emb.obs:
        cats = emb.obs[label].astype("category")
        for i, c in enumerate(cats.cat.categories):
            m = (cats == c).to_numpy()
            ax.scatter(xy[m, 0], xy[m, 1], s=6, label=str(c), color=plt.cm.tab20(i % 20))
        ax.legend(fontsize=6, markerscale=2, bbox_to_anchor=(1.0, 1.0), loc="upper left", title=str(label),
                  title_fontsize=7)
    else:
        ax.scatter(xy[:, 0], xy[:, 1], s=6)
    ax.set_title(f"UMAP of cell embeddings, pe={pe}")
    ax.set_xticks([])
    ax.set_yticks([])
    return fig
