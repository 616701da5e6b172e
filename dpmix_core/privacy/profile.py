"""One release's privacy as a curve: the privacy profile delta(eps) and the f-DP trade-off curve.

An (eps, delta) pair is one point; the whole profile says how strong the release is at every eps, and the
trade-off curve says what it means for an attacker: the smallest type II error (missed memberships) any
test reaches at each type I error (false alarms) when asked "was this record in the data?" (Dong, Roth &
Su 2022, "Gaussian differential privacy", JRSS-B; Def. 2.1, Prop. 2.5/2.12).

The profile is computed from the release's ``dp_accounting`` event with the RDP accountant (Mironov 2017;
Balle et al. 2020 conversion, as implemented by dp_accounting), so it is a rigorous *upper* bound on
delta(eps) and the trade-off curve below is a rigorous *lower* bound on the attacker's type II error.
The Gaussian-DP curve with the same delta at the headline eps is drawn for reference only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from scipy.optimize import brentq
from scipy.stats import norm

from dpmix_core.privacy.accountants.rdp_dp_accounting import guarded_event_rdp
from dpmix_core.privacy.analysis.gdp import gdp_delta
from dpmix_core.privacy.checks import check_delta
from dpmix_core.privacy.release import Adjacency, MixingRelease

__all__ = [
    "PROFILE_ORDERS",
    "python_orders",
    "PrivacyProfile",
    "attack_power_bound",
    "gdp_mu_for",
    "gdp_tradeoff",
    "privacy_profile",
    "tradeoff_from_profile",
]

PROFILE_ORDERS = tuple(
    float(o) for o in np.concatenate([np.linspace(1.01, 10, 60), np.arange(11, 65), [80, 96, 128, 192, 256]])
)
WOR_PROFILE_ORDERS = (*range(2, 65), 80, 96, 128, 192, 256)  # WBK's bound is for integer orders


@dataclass(frozen=True)
class PrivacyProfile:
    """delta(eps) on a grid of eps (a rigorous upper bound), with how it was computed."""

    epsilons: tuple[float, ...]
    deltas: tuple[float, ...]
    method: str


def python_orders(orders: Sequence[float] | np.ndarray) -> list[float]:
    """RDP orders as Python ints/floats: dp_accounting takes its exact integer-order path for without-replacement
    sampling only for Python numbers (a numpy 11.0 falls back to a far looser bound).

    Args:
        orders: RDP orders alpha > 1, as any sequence or array of numbers.

    Returns:
        The same orders in the same sequence, whole numbers as ``int`` and the rest as ``float``.
    """
    return [int(o) if float(o).is_integer() else float(o) for o in orders]


def privacy_profile(release: MixingRelease, epsilons: Sequence[float] | np.ndarray) -> PrivacyProfile:
    """delta(eps) of the release at each eps, from its dp_accounting event under RDP (upper bound).

    Args:
        release: the mixing release; its adjacency picks the neighbouring relation and the RDP orders
            (integer orders for replace-one, where the without-replacement bound is stated for them).
        epsilons: the eps values (finite, >= 0) at which delta is wanted.

    Returns:
        A :class:`PrivacyProfile` with ``epsilons`` as given (floats), ``deltas`` (each an upper bound on
        delta(eps), capped at 1) and ``method``.

    Raises:
        ValueError: an eps value that is negative, NaN or infinite.
    """
    relation = (
        rdp.NeighborRel.ADD_OR_REMOVE_ONE
        if release.adjacency is Adjacency.ADD_REMOVE_ONE
        else rdp.NeighborRel.REPLACE_ONE
    )
    orders = PROFILE_ORDERS if release.adjacency is Adjacency.ADD_REMOVE_ONE else WOR_PROFILE_ORDERS
    accountant = rdp.RdpAccountant(orders=python_orders(orders), neighboring_relation=relation)
    event = release.dp_event()
    accountant.compose(event)
    # dp_accounting's own get_delta returns delta = 0 at every eps where its composed RDP is rounding noise
    # (T = 1e12, q = 0.5, z = 7e8); the guarded curve never is
    values = guarded_event_rdp(accountant.rdp, orders, event)
    deltas = []
    for eps in epsilons:
        if not (math.isfinite(eps) and eps >= 0):
            raise ValueError(f"epsilon values must be finite and >= 0. Found {eps}.")
        deltas.append(min(1.0, float(rdp.compute_delta(python_orders(orders), values, float(eps))[0])))
    return PrivacyProfile(tuple(float(e) for e in epsilons), tuple(deltas), "RDP (dp_accounting), upper bound")


def tradeoff_from_profile(profile: PrivacyProfile, alphas: Sequence[float]) -> np.ndarray:
    """Lower bound on the type II error beta(alpha): sup over the profile of the (eps, delta)-DP curve.

    Each (eps, delta) point implies beta >= max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))
    (Dong, Roth & Su 2022, Prop. 2.5); a release satisfying all of them is bounded by their maximum.

    Args:
        profile: the release's privacy profile (e.g. from :func:`privacy_profile`).
        alphas: type I errors (false-positive rates) as fractions in [0, 1].

    Returns:
        float array of shape (len(alphas),): the lower bound on the type II error (missed-membership rate) at
        each alpha, a fraction in [0, 1].
    """
    a = np.asarray(alphas, dtype=float)[:, None]
    eps = np.asarray(profile.epsilons)[None, :]
    delta = np.asarray(profile.deltas)[None, :]
    e_eps = np.exp(np.minimum(eps, 700.0))  # beyond, the first line is negative for every alpha > 0 anyway
    lines = np.maximum(1 - delta - e_eps * a, np.exp(-eps) * (1 - delta - a))
    return np.clip(lines.max(axis=1), 0.0, 1.0)


def attack_power_bound(epsilon: float, delta: float, alpha: float = 0.05) -> float:
    """Largest power (1 - beta) of any membership test at false-positive rate alpha under (eps, delta)-DP.

    Args:
        epsilon: the release's epsilon (inf allowed: then any power up to 1 is possible).
        delta: the release's delta, in (0, 1).
        alpha: the test's false-positive rate, a fraction in [0, 1] (not checked).

    Returns:
        The largest true-positive rate (a fraction in [0, 1]) any test can reach at ``alpha``
        (Dong, Roth & Su 2022, Prop. 2.5).

    Raises:
        ValueError: delta outside (0, 1).
    """
    check_delta(delta)
    if math.isinf(epsilon):
        return 1.0
    beta = max(0.0, 1 - delta - math.exp(min(epsilon, 700.0)) * alpha, math.exp(-epsilon) * (1 - delta - alpha))
    return min(1.0, 1.0 - beta)


def gdp_tradeoff(mu: float, alphas: Sequence[float]) -> np.ndarray:
    """mu-GDP trade-off curve G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth & Su 2022, Def. 2.7).

    Args:
        mu: the Gaussian-DP parameter, finite and >= 0 (0: the line 1 - alpha, no privacy loss).
        alphas: type I errors; values outside [0, 1] are clipped to it.

    Returns:
        float array of the shape of ``alphas``: the smallest type II error at each alpha, in [0, 1].
    """
    a = np.clip(np.asarray(alphas, dtype=float), 0.0, 1.0)
    return norm.cdf(norm.ppf(1 - a) - mu)


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The mu whose mu-GDP has the same delta at this eps (Dong, Roth & Su 2022, Cor. 2.13), for reference curves.

    Args:
        epsilon: the eps at which the deltas are matched (>= 0).
        delta: the delta to match, in (0, 1).

    Returns:
        mu > 0 (to 1e-10); inf when epsilon is negative or not finite, or when no mu below about 1e4 reaches
        delta.

    Raises:
        ValueError: delta outside (0, 1).
    """
    check_delta(delta)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        return math.inf

    def gap(mu: float) -> float:
        return gdp_delta(epsilon, mu) - delta  # log-space: no overflow of e^eps at eps > 709

    hi = 1.0
    while gap(hi) < 0 and hi < 1e4:
        hi *= 2
    if gap(hi) < 0:
        return math.inf
    return float(brentq(gap, 1e-8, hi, xtol=1e-10))
