"""The budget panel's building blocks: other releases of the same dataset, and the budget as a table."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from dpmix_core.mechanisms.descriptions import gaussian_sigma
from dpmix_core.privacy.budget import (
    REPLACE_ONE,
    Budget,
    BudgetItem,
    dpsgd_item,
    gaussian_item,
    laplace_label_item,
    steps_per_epoch,
)
from dpmix_core.privacy.release import MixingRelease

__all__ = ["dp_pca_budget_item", "dpsgd_budget_item", "label_budget_item", "ranges_budget_item", "budget_table"]


def dp_pca_budget_item(*, epsilon: float, delta: float) -> BudgetItem:
    """Analyze-Gauss DP-PCA at (eps, delta) by the analytic Gaussian calibration (Balle & Wang 2018)."""
    z = gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0, method="analytic")
    return gaussian_item(f"DP-PCA (ε = {epsilon:g}, δ = {delta:g})", noise_multiplier=z)


def dpsgd_budget_item(*, n: int, batch_size: int, epochs: int, noise_multiplier: float) -> BudgetItem:
    """A DP-SGD model trained for ``epochs`` passes with Poisson batches of expected size B (as the DP-SGD baseline
    counts them: ``steps_per_epoch`` per pass)."""
    if not (1 <= batch_size <= n):
        raise ValueError(f"batch size must be between 1 and n = {n}. Found {batch_size}.")
    steps = steps_per_epoch(n, batch_size) * epochs
    return dpsgd_item(
        f"DP-SGD model (z = {noise_multiplier:g}, B = {batch_size}, {epochs} epochs)",
        n=n,
        batch_size=batch_size,
        steps=steps,
        noise_multiplier=noise_multiplier,
    )


def label_budget_item(*, epsilon: float) -> BudgetItem:
    return laplace_label_item(f"label-only Laplace (ε = {epsilon:g})", epsilon=epsilon)


def ranges_budget_item(*, epsilon: float, delta: float, release: MixingRelease | None = None) -> BudgetItem:
    """A table's private feature ranges at (eps, delta) alone, as ``--private-ranges EPS`` releases them beside
    ``release``, under its adjacency (replace-one without one; :mod:`dpmix_core.synthesis.private_ranges`)."""
    from dpmix_core.synthesis.private_ranges import ROUNDS, range_noise_multiplier, ranges_item

    relation = REPLACE_ONE if release is None else release.adjacency.value
    item = ranges_item(range_noise_multiplier(epsilon, delta, relation), ROUNDS, relation)
    return replace(item, name=f"private feature ranges (ε = {epsilon:g}, {relation})")


def budget_table(budget: Budget) -> pd.DataFrame:
    """One row per release (its epsilon alone at the budget's delta), then the total."""
    rows = [{"release": name, "ε alone": eps} for name, eps in budget.per_item]
    rows.append({"release": f"total ({budget.method})", "ε alone": budget.epsilon})
    return pd.DataFrame(rows)
