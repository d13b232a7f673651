"""Plots: the causal DAG, the Poincaré embedding and training curves (matplotlib, Agg)."""

from __future__ import annotations

from cape_pipeline.pl.curves import plot_loss, plot_training_curves
from cape_pipeline.pl.figures import plot_dag, plot_poincare, save_encoding_figures

__all__ = ["plot_dag", "plot_loss", "plot_poincare", "plot_training_curves", "save_encoding_figures"]
