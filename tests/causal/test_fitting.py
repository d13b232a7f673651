"""The augmented-Lagrangian update shared by the low-rank and screened fits."""

from __future__ import annotations

import math

from cape_pipeline.causal.fitting import augmented_lagrangian_step


def test_first_update_raises_rho_and_moves_alpha():
    rho, alpha, h_last = augmented_lagrangian_step(1.0, 0.5, 0.2, math.inf)
    assert (rho, alpha, h_last) == (1.0, 0.5 + 0.2, 0.2)  # h fell from inf: ρ held


def test_rho_grows_tenfold_when_h_falls_by_less_than_four():
    rho, alpha, _ = augmented_lagrangian_step(2.0, 0.0, 0.1, 0.2)
    assert rho == 20.0 and alpha == 2.0 * 0.1
    rho, _, _ = augmented_lagrangian_step(2.0, 0.0, 0.04, 0.2)  # fell by 5x: held
    assert rho == 2.0


def test_rho_cap():
    assert augmented_lagrangian_step(1e15, 0.0, 1.0, 1.0, rho_cap=1e16)[0] == 1e16
    assert augmented_lagrangian_step(1e15, 0.0, 1.0, 1.0)[0] == 1e16
    assert augmented_lagrangian_step(1e16, 0.0, 1.0, 1.0, rho_cap=1e16)[0] == 1e16
    assert augmented_lagrangian_step(1e16, 0.0, 1.0, 1.0)[0] == 1e17
