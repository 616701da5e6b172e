"""A privacy statement for a paper's methods section or a data-release note, written from one accounted release.

What was released comes from the :class:`~dpmix_core.privacy.release.MixingRelease` (sampling, sizes, noise,
bounds, what was mixed, post-processing); the guarantee from the accountant's result on that release (its ε, δ,
adjacency, what it protects, whether it is a rigorous upper bound, its reference). Nothing is restated by hand,
so the paragraph cannot claim more than the accountant does: an approximation is called one, a release outside
every accountant's assumptions says so instead of stating a guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import TYPE_CHECKING, Any

from dpmix_core import __version__
from dpmix_core.privacy.release import Adjacency, Mechanism, MixingRelease, Protects

if TYPE_CHECKING:  # the accountants load dp_accounting: a card or a CLI line needs only the result's fields
    from dpmix_core.privacy.accountants import EpsilonResult

__all__ = ["WEAK_EPSILON", "StatedResult", "bound_text", "card_statement", "privacy_statement", "tightest_statement"]

WEAK_EPSILON = 10.0  # above: weak protection (the statement says so; the pages' "weak" band ends here)

_ADJACENCY = {
    Adjacency.REPLACE_ONE: "replace-one adjacency (neighbouring datasets differ in one person's record, replaced "
    "by another; n is public)",
    Adjacency.ADD_REMOVE_ONE: "add/remove-one adjacency (neighbouring datasets differ by one person's record, "
    "added or removed)",
}
_PROTECTS = {
    Protects.FEATURES_AND_LABELS: "the whole record, features and label",
    Protects.FEATURES_ONLY: "the record's features only (a swap within its class: its label is not protected)",
}


@dataclass(frozen=True)
class StatedResult:
    """The fields of an accountant's result a statement reads: an EpsilonResult has them, so has a card's entry."""

    accountant: str
    epsilon: float
    delta: float
    upper_bound: bool
    reference: str
    not_covered: str | None = None

    @classmethod
    def from_card(cls, entry: dict[str, Any]) -> StatedResult:
        """One entry of a privacy card's "epsilons" (``EpsilonResult.to_json``; infinite epsilon as "inf")."""
        eps = entry["epsilon"]
        return cls(
            accountant=str(entry["accountant"]),
            epsilon=float(eps),  # float("inf") reads the JSON's "inf"
            delta=float(entry["delta"]),
            upper_bound=bool(entry["upper_bound"]),
            reference=str(entry.get("reference") or "see the card"),
            not_covered=entry.get("not_covered"),
        )


def _what_was_released(r: MixingRelease) -> str:
    noise = (
        f"plus Gaussian noise of standard deviation σx = {r.sigma_x:.4g} on every feature and σy = "
        f"{r.sigma_y:.4g} on every label entry"
    )
    if r.mechanism is Mechanism.POISSON:
        q = r.mix_degree / r.n
        return (
            f"We release T = {r.num_points:,} synthetic points. Each is the sum of the records in a Poisson sample "
            f"(every record included independently with probability q = m/n = {r.mix_degree:,}/{r.n:,} = {q:.3g}, "
            f"n stated publicly) divided by m = {r.mix_degree:,}, {noise}."
        )
    if r.mechanism is Mechanism.CLASS_CENTRIC and r.class_sizes is not None:
        k, low, high = len(r.class_sizes), min(r.class_sizes), max(r.class_sizes)
        sizes = f"{low:,} each" if low == high else f"{low:,} to {high:,}"
        return (
            f"We release T = {r.num_points:,} synthetic points, ⌊T/K⌋ = {r.num_points // k:,} for each of the "
            f"K = {k} classes (class sizes {sizes}, treated as public). "
            f"Each is the average of ℓ = {r.mix_degree:,} distinct records of one class, drawn uniformly without "
            f"replacement, {noise}."
        )
    return (
        f"We release T = {r.num_points:,} synthetic points. Each is the average of ℓ = {r.mix_degree:,} distinct "
        f"records drawn uniformly without replacement from the n = {r.n:,} private records, {noise}."
    )


def _preparation(r: MixingRelease) -> str:
    parts = [f"Before mixing, every record is brought within public bounds ({r.bounds.describe()})"]
    if r.preprocessing == "zscore":
        parts.append("after z-scoring with public constants")
    if r.feature_transform != "pixels":
        parts.append(f"and its features are {r.feature_transform}, a public map applied to each record alone")
    text = " ".join(parts) + "."
    post = [
        what
        for flag, what in (
            (r.clamp_negative, "negative values set to 0"),
            (r.hard_labels, "labels replaced by their argmax"),
        )
        if flag
    ]
    if post:
        text += f" The released points then have {' and '.join(post)} (post-processing)."
    return text


def bound_text(x: float) -> str:
    """x rounded *up* to 3 significant digits: a printed upper bound never falls below the computed one."""
    if x <= 0 or not math.isfinite(x):
        return f"{x:.3g}"
    exact = Decimal(x)  # the double's exact value: no division error can round it down
    quantum = Decimal(1).scaleb(exact.adjusted() - 2)
    return f"{float(exact.quantize(quantum, rounding=ROUND_CEILING)):.3g}"


def privacy_statement(release: MixingRelease, result: EpsilonResult | StatedResult) -> str:
    """One paragraph: what was released, how records were bounded, and the guarantee exactly as the accountant states it.

    Args:
        release: the release as mechanism and accountant see it (e.g. ``ReleaseReading.release``).
        result: an accountant's :class:`EpsilonResult` on that release, or the same fields read from its privacy
            card (:class:`StatedResult`).

    Returns:
        Plain text (Unicode ε, δ, σ, ℓ); :func:`dpmix_core.views.exports.latex_text` turns it into LaTeX.
    """
    guarantee_of = _ADJACENCY[release.adjacency] + f", protecting {_PROTECTS[release.protects]}"
    cite = result.reference
    eps = "∞" if math.isinf(result.epsilon) else f"{result.epsilon:.3g}"
    bound = bound_text(result.epsilon)
    if result.not_covered is not None:
        guarantee = (
            f"No differential-privacy guarantee is claimed: {result.not_covered}, which no accountant covers "
            f"(ε = {eps} at δ = {result.delta:.2g} from {result.accountant} is shown for reference only)."
        )
    elif not math.isfinite(result.epsilon):
        guarantee = f"No finite ε is certified for this release under {result.accountant} (too little noise)."
    elif result.upper_bound:
        guarantee = (
            f"The release satisfies (ε, δ) = ({bound}, {result.delta:.2g})-differential privacy under {guarantee_of}; "
            f"ε is a rigorous upper bound computed with the {result.accountant} accountant ({cite}), rounded up."
        )
        if result.epsilon > WEAK_EPSILON:
            guarantee += (
                f" An ε above {WEAK_EPSILON:g} is weak protection: an attacker's odds about any one person may change "
                "by up to a factor e^ε."
            )
    else:
        guarantee = (
            f"Under {guarantee_of}, the {result.accountant} accountant ({cite}) estimates ε ≈ {eps} at "
            f"δ = {result.delta:.2g}; this is an approximation, not an upper bound, and is no guarantee."
        )
    closing = (
        "Every model or statistic computed from the released points alone inherits the guarantee (post-processing)."
        if result.upper_bound and result.not_covered is None and math.isfinite(result.epsilon)
        else ""
    )
    tool = f"Accounting by DPMix Studio (dpmix_core {__version__})."
    return " ".join(
        part for part in (_what_was_released(release), _preparation(release), guarantee, closing, tool) if part
    )


def tightest_statement(release: MixingRelease, results: Sequence[EpsilonResult | StatedResult]) -> str:
    """The statement of the tightest finite, covered, rigorous epsilon among ``results``, else of the first result."""
    guarantees = [r for r in results if r.upper_bound and r.not_covered is None and math.isfinite(r.epsilon)]
    if guarantees:
        return privacy_statement(release, min(guarantees, key=lambda r: r.epsilon))
    if not results:
        raise ValueError("a release without an epsilon has no statement.")
    return privacy_statement(release, results[0])


def card_statement(release: MixingRelease, entries: list[dict[str, Any]]) -> str:
    """The statement for a privacy card, from its "epsilons" entries (an accountant's error entry is skipped)."""
    return tightest_statement(release, [StatedResult.from_card(e) for e in entries if "epsilon" in e])
