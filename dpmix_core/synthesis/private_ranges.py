"""Private feature ranges for a table's release: loose public bounds narrowed to where the records lie, with noise.

Why: a release scales each feature to [0,1] by its public bounds and calibrates its noise to that box. Bounds much
wider than the records (one pair for columns in different units, a form's generous limits) crowd the records into
a sliver of [0,1], and the noise swamps them: on ``bench/own_data_feature_bounds.py``'s table the one pair that
holds every column leaves a model near chance where bounds per column reach the non-private accuracy. Where the
holder knows no tighter bounds, a small share of the budget can find them: the ranges of
:mod:`dpmix_core.mechanisms.feature_ranges` (noisy hierarchical histograms inside the public bounds, a heuristic
that narrows a range only where its noisy counts are clear, here over :data:`ROUNDS` histograms) become the bounds the
release scales with. On that table (20,000 records, 8 columns, one pair of bounds over units from 0.1 to 20,000), a
DPMix release at epsilon 1 / 4 trains a linear model to 92.4 / 93.2 % with ranges at a tenth of the budget, against
44.2 / 52.4 % without and 90.4 / 95.5 % with the codebook's bounds per column (3 seeds; docs/PERFORMANCE.md).

    public bounds ──► records scaled to [0,1] ──► noisy histograms ──► ranges (published, in the table's units)
                                                                           │
    records ──────────────────────────────────────────────► scaled by the ranges, clipped ──► mixed + noise (published)

Features whose public bounds are already exact (``exact``: the one-hot features of a table's public categories, 0 or
1) are left out: they keep (0, 1) and the histograms count the other d' columns only, so each count's noise, which
grows with sqrt(d'), is smaller (``bench/private_ranges_one_hot.py``: 3 numeric columns beside 40 one-hot features,
4,000 records, ranges at epsilon 0.1: each range 1.1-1.6 times its column's span, against 2.2-6.5 counting all 43).

Privacy: everything published is the ranges and the points. The ranges are ``rounds`` Gaussian histograms of every
counted feature column (a record adds 1 to one bin of each of the d' columns), ``SelfComposed(Gaussian,
rounds)`` under the release's own adjacency (:func:`~dpmix_core.mechanisms.feature_ranges.ranges_event`:
add/remove-one for Poisson mixing, replace-one for the others). Given the ranges, the points are the release every accountant analyses: its records lie in
[0,1]^d after the scaling and clipping, the box the accountants assume. The two compose (:func:`composition_epsilon`):
that total is the rigorous epsilon of everything published, the one a card states and a target calibrates to
(:func:`~dpmix_core.privacy.calibration.calibrate_sigma_composed`). The composition is dp_accounting's PLD under
add/remove-one (Poisson mixing: as tight as ``pld-poisson`` on the points alone;
:func:`~dpmix_core.privacy.budget.add_remove_pld_epsilon`) and RDP composition under replace-one (Mironov 2017,
Prop. 1; mixing without replacement, which ``rdp-wor`` reads the same way; :func:`~dpmix_core.privacy.budget.compose_budget`). The
ranges' noise multiplier is the analytic Gaussian's for their epsilon alone at the release's delta
(:func:`range_noise_multiplier`), so it depends on that budget, delta and the adjacency only, never on the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpmix_core.mechanisms.feature_ranges import dp_feature_ranges, ranges_event
from dpmix_core.privacy.checks import FeatureRange, check_feature_range, feature_range_vectors

__all__ = [
    "COMPOSITIONS",
    "RANGES_SEED_STREAM",
    "RANGES_SHARE",
    "ROUNDS",
    "PrivateRanges",
    "check_exact_features",
    "check_range_epsilon",
    "composed_epsilon",
    "composition_epsilon",
    "private_ranges",
    "range_noise_multiplier",
    "ranges_refusal",
    "ranges_sentence",
    "ranges_item",
]

RANGES_SHARE = 0.1  # the ranges' budget when only "private ranges" is asked for: this share of the target epsilon
ROUNDS = 10  # histograms a feature's range zooms through, each at most 16/3 narrower: up to ~2e7 in all (one pair of
# bounds over columns whose units differ by 1e5 needs ~7; extra rounds cost little, a range that fits stays)
RANGES_SEED_STREAM = 0x52414E  # the ranges' noise: SeedSequence([seed, this]), apart from the release's own stream


def check_range_epsilon(value: object) -> float:
    """The ranges' epsilon: a positive finite number (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"the private ranges' epsilon must be a positive finite number. Found {value!r}.")
    return float(value)


def ranges_refusal(range_epsilon: float, target_epsilon: float | None) -> str | None:
    """Why the ranges' epsilon cannot go with this target (one line), or None: the target covers the ranges and the
    points together, so the ranges alone must stay below it."""
    if target_epsilon is None or range_epsilon < target_epsilon:
        return None
    return (
        f"the private ranges' epsilon {range_epsilon:g} must be below the target {target_epsilon:g} (it is spent on top "
        f"of the release's; e.g. {RANGES_SHARE * target_epsilon:g})."
    )


def ranges_item(noise_multiplier: float, rounds: int, relation: str):
    """The ranges as one release of a privacy budget (:class:`~dpmix_core.privacy.budget.BudgetItem`), under
    ``relation`` (:func:`~dpmix_core.mechanisms.feature_ranges.ranges_event`)."""
    from dpmix_core.privacy.budget import BudgetItem  # dp_accounting: loaded where the ranges are accounted

    event = ranges_event(noise_multiplier, rounds, replace_one=relation == "replace-one")
    return BudgetItem("private feature ranges", event, relation)


def range_noise_multiplier(epsilon: float, delta: float, relation: str) -> float:
    """The ranges' noise multiplier z for (``epsilon``, ``delta``) alone: the rounds are exactly one Gaussian with
    multiplier z under add/remove-one (sensitivity 1) and z / sqrt(2) under replace-one, so z is the analytic
    Gaussian's (Balle & Wang 2018, Thm. 8) sigma for sensitivity 1, or sqrt(2) under replace-one."""
    from dpmix_core.mechanisms.descriptions import gaussian_sigma

    sensitivity = 1.0 if relation == "add/remove-one" else math.sqrt(2.0)
    return gaussian_sigma(epsilon=check_range_epsilon(epsilon), delta=delta, sensitivity=sensitivity, method="analytic")


@dataclass(frozen=True)
class PrivateRanges:
    """Ranges of a table's features released with Gaussian noise (module docstring), in the table's units."""

    epsilon: float  # the ranges' budget alone, at the release's delta
    noise_multiplier: float  # z: the rounds together are one Gaussian with this multiplier (add/remove-one, L2 1)
    rounds: int
    bins: int
    relation: str  # the release's adjacency, under which the ranges are accounted
    public: FeatureRange  # the public bounds the ranges narrow
    low: tuple[float, ...]  # per feature, the table's units
    high: tuple[float, ...]
    exact: tuple[int, ...] = ()  # features left at their exact public bounds (0, 1), not counted (module docstring)

    def __post_init__(self) -> None:
        check_range_epsilon(self.epsilon)
        if self.relation not in ("replace-one", "add/remove-one"):
            raise ValueError(f"relation must be replace-one or add/remove-one. Found {self.relation!r}.")
        if len(self.low) != len(self.high) or not all(a < b for a, b in zip(self.low, self.high, strict=True)):
            raise ValueError("private ranges need one low < high per feature.")
        object.__setattr__(self, "exact", check_exact_features(self.exact, self.public, d=len(self.low)))
        if any((self.low[j], self.high[j]) != (0.0, 1.0) for j in self.exact):
            raise ValueError("private ranges leave the features with exact bounds at (0, 1).")

    @property
    def feature_range(self) -> FeatureRange:
        """The bounds the release scales with (one pair per feature, canonical)."""
        return check_feature_range("private ranges", tuple(zip(self.low, self.high, strict=True)))

    def narrowed(self) -> int:
        """How many features' ranges are narrower than their public bounds."""
        lo, hi = feature_range_vectors(self.public, len(self.low))
        return int(np.sum((np.asarray(self.low) > lo) | (np.asarray(self.high) < hi)))

    def item(self):
        """This release of ranges as a privacy budget's item."""
        return ranges_item(self.noise_multiplier, self.rounds, self.relation)

    def describe(self) -> str:
        counted = len(self.low) - len(self.exact)
        kept = f", {len(self.exact)} one-hot features kept at (0, 1)" if self.exact else ""
        return (
            f"feature ranges released with Gaussian noise inside the public bounds ({self.rounds} rounds of "
            f"{self.bins}-bin histograms, noise multiplier {self.noise_multiplier:.4g}, epsilon {self.epsilon:g} "
            f"alone, {self.relation}); {self.narrowed()} of {counted} counted features narrowed{kept}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "noise_multiplier": self.noise_multiplier,
            "rounds": self.rounds,
            "bins": self.bins,
            "relation": self.relation,
            "low": list(self.low),
            "high": list(self.high),
            "narrowed": self.narrowed(),
            "exact_features": list(self.exact),
        }


def private_ranges(
    x_train: np.ndarray,
    public: FeatureRange,
    *,
    epsilon: float,
    delta: float,
    relation: str,
    seed: int,
    exact: Sequence[int] = (),
) -> PrivateRanges:
    """The ranges of ``x_train``'s features (raw units, (n, d)) inside the ``public`` bounds, released at ``epsilon``
    alone (module docstring); the ``exact`` features (bounds (0, 1), a public category's one-hot) are not counted
    and keep (0, 1). Deterministic in (records, bounds, epsilon, delta, relation, seed, exact)."""
    x = np.asarray(x_train, dtype=np.float64).reshape(len(x_train), -1)
    d = x.shape[1]
    lo, hi = feature_range_vectors(check_feature_range("feature_range", public), d)
    fixed = check_exact_features(exact, public, d=d)
    unit = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    z = range_noise_multiplier(epsilon, delta, relation)
    ranges = dp_feature_ranges(
        unit,
        noise_multiplier=z,
        rounds=ROUNDS,
        seed=np.random.SeedSequence([int(seed), RANGES_SEED_STREAM]),
        exact=fixed,
    )
    width = hi - lo
    low = np.where(ranges.low <= 0.0, lo, lo + ranges.low * width)  # kept: exactly
    high = np.where(ranges.high >= 1.0, hi, lo + ranges.high * width)
    return PrivateRanges(
        epsilon=float(epsilon),
        noise_multiplier=float(z),
        rounds=ranges.rounds,
        bins=ranges.bins,
        relation=relation,
        public=public,
        low=tuple(float(v) for v in low),
        high=tuple(float(v) for v in high),
        exact=fixed,
    )


def check_exact_features(exact: object, public: FeatureRange, *, d: int | None = None) -> tuple[int, ...]:
    """The features private ranges leave at their exact public bounds (module docstring), sorted: indices of
    features whose ``public`` bounds are (0, 1), fewer than all ``d`` of them (ValueError otherwise); ``d`` None:
    the number of features is not known yet (a pair of bounds for all of them)."""
    if isinstance(exact, (str, bytes)) or not isinstance(exact, (Sequence, np.ndarray)):
        raise ValueError(f"exact features must be a list of feature indices. Found {exact!r}.")
    if any(isinstance(j, bool) or not isinstance(j, (int, np.integer)) or j < 0 for j in exact):
        raise ValueError(f"exact features must be non-negative feature indices. Found {list(exact)!r}.")
    fixed = tuple(sorted({int(j) for j in exact}))
    if not fixed:
        return fixed
    bounds = check_feature_range("feature_range", public)
    per_feature = not (len(bounds) == 2 and isinstance(bounds[0], (int, float)))
    d = len(bounds) if per_feature and d is None else d
    if d is not None and fixed[-1] >= d:
        raise ValueError(f"exact feature {fixed[-1]} is not one of the {d} features.")
    if d is not None and len(fixed) >= d:
        raise ValueError(
            "private ranges: every feature is a category's one-hot feature, whose bounds (0, 1) are exact; there is "
            "nothing to narrow."
        )
    pairs = [bounds[j] for j in fixed] if per_feature else [bounds]
    if any(tuple(map(float, pair)) != (0.0, 1.0) for pair in pairs):  # type: ignore[arg-type]
        raise ValueError("exact features are one-hot features (0 or 1): their public bounds must be (0, 1).")
    return fixed


COMPOSITIONS = {  # relation -> (the card's name for the epsilon of the ranges and the points together, reference)
    "add/remove-one": (
        "pld-composition",
        "PLD composition of the private feature ranges and the release (dp_accounting, pessimistic; Doroshenko et al. "
        "2022)",
    ),
    "replace-one": (
        "rdp-composition",
        "RDP composition of the private feature ranges and the release (Mironov 2017, Prop. 1; dp_accounting)",
    ),
}


def composed_epsilon(ranges: PrivateRanges, release, delta: float):
    """The :class:`~dpmix_core.privacy.accountants.EpsilonResult` of everything published: ``ranges`` and the
    mixing ``release`` scaled by them, composed (PLD or RDP: module docstring). A rigorous upper bound where the release is
    covered; labelled with the release's sampling, adjacency and what it protects."""
    from dpmix_core.privacy.accountants import EpsilonResult

    if ranges.relation != release.adjacency.value:
        raise ValueError(
            f"the ranges are accounted under {ranges.relation}, the release under {release.adjacency.value}."
        )
    epsilon = composition_epsilon(ranges.item(), release, delta)
    reason = None if math.isfinite(epsilon) else "the composition diverges (too little noise)"
    return EpsilonResult(
        accountant=COMPOSITIONS[ranges.relation][0],
        epsilon=float(epsilon),
        delta=float(delta),
        upper_bound=release.covered,
        sampling=release.sampling.value,
        adjacency=release.adjacency.value,
        assumptions=f"{release.describe()}; composed with {ranges.describe()}",
        reference=COMPOSITIONS[ranges.relation][1],
        reason=reason,
        protects=release.protects.value,
        not_covered=release.not_covered,
    )


def composition_epsilon(ranges_item, release, delta: float) -> float:
    """epsilon at ``delta`` of a ranges item (:func:`ranges_item`) and a mixing release together: dp_accounting's
    PLD under add/remove-one, RDP composition under replace-one (module docstring)."""
    import dp_accounting

    from dpmix_core.privacy.budget import ADD_REMOVE, add_remove_pld_epsilon, compose_budget, mixing_item

    if ranges_item.relation == ADD_REMOVE:
        return add_remove_pld_epsilon(dp_accounting.ComposedDpEvent([ranges_item.event, release.dp_event()]), delta)
    return compose_budget([ranges_item, mixing_item("release", release)], delta).epsilon


def ranges_sentence(section: dict) -> str:
    """The privacy statement's sentence on a card's ``feature_ranges`` section."""
    exact = section.get("exact_features") or ()
    kept = (
        f" The {len(exact)} one-hot features of the public categories kept their exact bounds (0, 1)." if exact else ""
    )
    return (
        "The bounds each feature was scaled with are part of the release: they were found inside the public bounds "
        f"by {section['rounds']} rounds of noisy histograms (Gaussian noise, noise multiplier "
        f"{float(section['noise_multiplier']):.4g}, ε = {float(section['epsilon']):g} alone), and the ε above "
        f"covers them and the points together.{kept}"
    )
