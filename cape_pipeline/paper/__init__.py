"""Figures of paper 000 (Xu et al., CAPE) redrawn with this package's code: ``cape reproduce …``.

:mod:`~cape_pipeline.paper.fig3` re-runs Sec. 5.1, Fig. 3 (Steps I–II on a 10-node DAG);
:mod:`~cape_pipeline.paper.theory` checks the theory figures S2 (Props. 4.1, 4.2) and S3
(Prop. A.10) numerically; :mod:`~cape_pipeline.paper.common` holds what they share (output
directory, figures, the JSON record). The DAG and Poincaré-ball panels are drawn by
:mod:`cape_pipeline.pl`.
"""

from __future__ import annotations

from cape_pipeline.paper.fig3 import FIG3_FILES, FIG3_N_EDGES, FIG3_N_NODES, reproduce_fig3
from cape_pipeline.paper.theory import FIGS2_FILES, FIGS3_FILES, reproduce_figS2, reproduce_figS3

__all__ = [
    "FIG3_FILES", "FIG3_N_EDGES", "FIG3_N_NODES", "FIGS2_FILES", "FIGS3_FILES",
    "reproduce_fig3", "reproduce_figS2", "reproduce_figS3",
]
