"""Accountants for random-mixing releases: one class per method, one interface.

>>> from dpmix_core.privacy.accountants import get_accountant, MixingSetting
>>> acc = get_accountant("lee2019")
>>> setting = MixingSetting(n=60000, l=256, T=10000, sigma_x=0.0711, sigma_y=0.0711)
>>> round(acc.epsilon(acc.release_for(setting), delta=1 / 60000).epsilon, 2)
15.0
"""

from __future__ import annotations

import math

from dpmix_core.privacy.accountants.base import (
    ENORMOUS_EPSILON,
    Accountant,
    EpsilonResult,
    MixingSetting,
    UnsupportedReleaseError,
    equal_class_sizes,
)
from dpmix_core.privacy.accountants.dpcda import DpcdaAccountant
from dpmix_core.privacy.accountants.gdp_clt import GdpCltAccountant
from dpmix_core.privacy.accountants.lee2019 import Lee2019Accountant
from dpmix_core.privacy.accountants.pld_poisson import PldPoissonAccountant
from dpmix_core.privacy.accountants.rdp_dp_accounting import RdpPoissonAccountant, RdpWorAccountant
from dpmix_core.privacy.release import MixingRelease

ACCOUNTANTS: dict[str, type[Accountant]] = {
    cls.name: cls
    for cls in (
        Lee2019Accountant,
        DpcdaAccountant,
        GdpCltAccountant,
        RdpPoissonAccountant,
        PldPoissonAccountant,
        RdpWorAccountant,
    )
}

__all__ = [
    "signed_gap",
    "equal_class_sizes",
    "ACCOUNTANTS",
    "ENORMOUS_EPSILON",
    "Accountant",
    "EpsilonResult",
    "MixingSetting",
    "UnsupportedReleaseError",
    "applicable_accountants",
    "clt_gap",
    "epsilon_all",
    "get_accountant",
]


def get_accountant(name: str, **options) -> Accountant:
    """An accountant by name (e.g. ``"pld-poisson"``); options go to its constructor."""
    try:
        cls = ACCOUNTANTS[name]
    except KeyError:
        raise ValueError(f"Unknown accountant {name!r}. Choose one of: {', '.join(ACCOUNTANTS)}.") from None
    return cls(**options)


def epsilon_all(setting: MixingSetting, delta: float, **pld_options) -> list[EpsilonResult]:
    """Every accountant, each on the release its paper analyses, at one setting."""
    results = []
    for name in ACCOUNTANTS:
        acc = get_accountant(name, **(pld_options if name == "pld-poisson" else {}))
        results.append(acc.epsilon(acc.release_for(setting), delta))
    return results


def applicable_accountants(release: MixingRelease) -> list[Accountant]:
    """The accountants whose sampling and adjacency assumptions match this release."""
    return [acc for acc in (cls() for cls in ACCOUNTANTS.values()) if acc.supports(release)]


def clt_gap(setting: MixingSetting | MixingRelease, delta: float, **pld_options) -> float:
    """eps(gdp-clt) - eps(pld-poisson) on the same Poisson release: < 0 where the CLT understates epsilon.

    gdp-clt is an approximation (DPFMix Thm. 2.1 is asymptotic); pld-poisson is a rigorous
    upper bound, so a negative gap is at least how much the CLT number is too optimistic.
    Both infinite: 0. ``pld_options`` go to the pld-poisson accountant (e.g. work_cap).
    """
    clt, exact = get_accountant("gdp-clt"), get_accountant("pld-poisson", **pld_options)
    release = clt.release_for(setting) if isinstance(setting, MixingSetting) else setting
    return signed_gap(clt.epsilon(release, delta).epsilon, exact.epsilon(release, delta).epsilon)


def signed_gap(clt_epsilon: float, exact_epsilon: float) -> float:
    """clt - exact, the quantity of :func:`clt_gap` for epsilons already computed (both infinite: 0)."""
    if math.isinf(clt_epsilon) and math.isinf(exact_epsilon) and clt_epsilon == exact_epsilon:
        return 0.0
    return clt_epsilon - exact_epsilon
