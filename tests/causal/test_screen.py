"""The candidate screen read from the Gram matrix ``XᵀX`` against the screen's passes over the rows."""

from __future__ import annotations

import pytest
import torch

from cape_pipeline.causal.screen import candidate_parents, screen_parents


def _data(n: int, m: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, m, generator=g) @ (torch.eye(m) + 0.15 * torch.randn(m, m, generator=g))
    x = x + 0.5 * torch.tanh(x[:, torch.randperm(m, generator=g)])  # some odd, non-linear links
    return (x - x.mean(0)) / x.std(0, unbiased=False)


@pytest.mark.parametrize("regulators", [False, True])
def test_the_gram_screen_picks_the_candidates_of_the_row_passes(regulators):
    n, m = 3000, 150
    x = _data(n, m, seed=0)
    reg = torch.arange(0, m, 3) if regulators else None
    gram = x.T @ x
    rows = candidate_parents(x, 6, regulators=reg)
    read = candidate_parents(x, 6, regulators=reg, gram=gram)
    assert rows.shape == read.shape
    # float32 products summed in another order can swap a near-tie at the k-th place; on these
    # data no row's candidate set changes
    assert [set(r) for r in rows.tolist()] == [set(r) for r in read.tolist()]
    first = screen_parents(x, 6, regulators=reg)
    assert [set(r) for r in first.tolist()] == [set(r) for r in screen_parents(x, 6, regulators=reg, gram=gram).tolist()]
