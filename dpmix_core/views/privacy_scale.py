"""Plain-language anchors for epsilon, for non-experts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpmix_core.privacy.statement import WEAK_EPSILON, bound_text

__all__ = [
    "format_epsilon",
    "qualitative_label",
    "odds_ratio_text",
    "headline",
    "Headline",
    "DEPLOYMENTS",
    "Deployment",
]

_BANDS = (
    (1.0, "strong"),
    (3.0, "moderate"),
    (WEAK_EPSILON, "weak"),
    (20.0, "very weak"),
)


def qualitative_label(epsilon: float) -> str:
    """A coarse word for an epsilon (a rule of thumb, not a standard)."""
    if math.isnan(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be >= 0. Found {epsilon}.")
    if math.isinf(epsilon):
        return "none (no formal guarantee)"
    for limit, label in _BANDS:
        if epsilon <= limit:
            return label
    return "little formal"


def format_epsilon(eps: float, *, upper_bound: bool = False) -> str:
    """eps to 3 significant digits (whole numbers from 100); a rigorous ``upper_bound`` is rounded *up*, so the
    printed number is never below the computed bound (as the privacy statement prints it)."""
    if math.isinf(eps):
        return "∞"
    if eps >= 1e6:
        return f"{bound_text(eps) if upper_bound else f'{eps:.3g}'} (enormous)"
    if eps >= 100:
        return f"{math.ceil(eps) if upper_bound else round(eps):,}"
    return bound_text(eps) if upper_bound else f"{eps:.3g}"


def odds_ratio_text(epsilon: float) -> str:
    """What eps means for an attacker's odds: they can change by at most e^eps (plus delta)."""
    if math.isinf(epsilon) or epsilon > math.log(1e6):
        return "an attacker's odds about any one person may change more than a million-fold: no real bound"
    factor = math.exp(epsilon)
    text = f"{factor:.3g}" if factor < 10 else f"{factor:,.0f}"
    return f"an attacker's odds about any one person change by at most ×{text}"


@dataclass(frozen=True)
class Headline:
    """One sentence per release: the tightest rigorous epsilon, what it means for odds and for any test."""

    epsilon: float
    delta: float
    accountant: str
    label: str
    odds: str
    test: str

    @property
    def title(self) -> str:
        """'Strong protection', 'Little formal protection', 'No formal protection' (eps = inf): the label as a heading."""
        if math.isinf(self.epsilon):
            return "No formal protection"
        return f"{self.label.capitalize()} protection"

    @property
    def epsilon_text(self) -> str:
        """The rigorous eps rounded *up*, as the tables print it ("∞" when infinite)."""
        return format_epsilon(self.epsilon, upper_bound=True)

    def text(self) -> str:
        return (
            f"ε = {self.epsilon_text} at δ = {self.delta:.2g} ({self.accountant}; {self.title.lower()}): {self.odds}; "
            f"{self.test}."
        )


def headline(epsilon: float, delta: float, accountant: str, *, alpha: float = 0.05) -> Headline:
    """The plain-language reading of one rigorous (eps, delta): odds and the best membership test's power."""
    from dpmix_core.privacy.profile import attack_power_bound

    power = attack_power_bound(epsilon, delta, alpha)
    if power >= 0.999:
        test = "no test is ruled out: an attacker may tell whether your record was used"
    else:
        test = (
            f"no test can tell whether your record was used with power above {100 * power:.3g} % "
            f"at a {100 * alpha:g} % false-positive rate"
        )
    return Headline(epsilon, delta, accountant, qualitative_label(epsilon), odds_ratio_text(epsilon), test)


@dataclass(frozen=True)
class Deployment:
    who: str
    epsilon: float
    what: str


DEPLOYMENTS = (
    Deployment(
        "US Census Bureau, 2020 redistricting data", 19.61, "total budget, central DP (17.14 persons + 2.47 housing)"
    ),
    Deployment("Apple, QuickType suggestions", 8.0, "per day, local DP"),
    Deployment("Apple, emoji suggestions", 4.0, "per day, local DP"),
    Deployment("DP deep-learning papers (typical)", 8.0, "common upper end at delta = 1e-5 (CIFAR-10, ImageNet)"),
    Deployment("DP deep-learning papers (strict)", 1.0, "often called a strong guarantee"),
)
