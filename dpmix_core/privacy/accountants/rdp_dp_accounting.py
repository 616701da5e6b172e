"""RDP accountants delegated to Google's dp_accounting (the field's reference library)."""

from __future__ import annotations

from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.release import Adjacency, DataBounds, MixingRelease, Sampling

# Integer orders only: fractional orders cost a slow series and rarely win here.
# Orders are a speed/tightness trade-off (bench/bench_accountants.py): dp_accounting's
# without-replacement bound costs O(alpha^2) Python steps per order.
POISSON_ORDERS = tuple(range(2, 33)) + (40, 48, 56, 64, 80, 96, 128, 192, 256)
WOR_ORDERS = tuple(range(2, 13)) + (14, 16, 20, 24, 32, 48, 64)


def _rdp_epsilon(release: MixingRelease, delta: float, orders: tuple[int, ...], relation) -> tuple[float, float]:
    accountant = rdp.RdpAccountant(orders=list(orders), neighboring_relation=relation)
    accountant.compose(release.dp_event())
    eps, order = accountant.get_epsilon_and_optimal_order(delta)
    return float(eps), float(order)


class RdpPoissonAccountant(Accountant):
    """Poisson-subsampled Gaussian RDP (Mironov, Talwar, Zhang 2019; Zhu & Wang 2019), via dp_accounting.

    Same release and sensitivities as gdp-clt (Poisson rate m/n, add/remove,
    Delta = C/m); conversion by Canonne-Kamath-Steinke 2020, Prop. 12 (as in
    dp_accounting). A rigorous upper bound.
    """

    name = "rdp-poisson"
    title = "Poisson-subsampled Gaussian RDP"
    reference = "Mironov, Talwar, Zhang 2019; Zhu & Wang 2019; dp_accounting RdpAccountant"
    rigorous = True
    sampling = Sampling.POISSON
    adjacency = Adjacency.ADD_REMOVE_ONE
    formula = (
        r"\varepsilon_{\mathrm{RDP}}(\alpha)=\frac{T}{\alpha-1}\log\sum_{k=0}^{\alpha}\binom{\alpha}{k}(1-q)^{\alpha-k}q^k"
        r"e^{(k^2-k)/(2z^2)},\ q=\frac{m}{n}"
    )
    explanation = (
        "The standard DP-SGD accountant applied to Poisson mixing: tracks the whole Renyi curve of the "
        "subsampled Gaussian, then converts. A guaranteed upper bound, usually a bit loose."
    )

    def __init__(self, *, orders: tuple[int, ...] = POISSON_ORDERS) -> None:
        self.orders = orders

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.clipped(setting.clip_x, setting.clip_y)

    def _compute(self, release: MixingRelease, delta: float):
        eps, order = _rdp_epsilon(release, delta, self.orders, rdp.NeighborRel.ADD_OR_REMOVE_ONE)
        return eps, order, (("noise_multiplier", release.noise_multiplier()),), None


class RdpWorAccountant(Accountant):
    """Tight RDP for sampling without replacement (WBK 2019, Thm. 27), via dp_accounting.

    Replace-one adjacency, gamma = l/n; the bounds are those of lee2019 ([0,1]^d)
    unless a DP-CDA clip c is given. Tighter than the published accountants
    because of the extra min{., 2 e^{(j-1) eps(j)}} term and the improved
    RDP -> DP conversion. A rigorous upper bound.

    Default orders stop at 64 for speed, which floors epsilon at about
    log(1/delta)/63 (0.10 at delta = 1e-5); pass ``orders`` for smaller budgets.
    """

    name = "rdp-wor"
    title = "Tight without-replacement RDP"
    reference = "Wang, Balle, Kasiviswanathan 2019, Thm. 27; dp_accounting RdpAccountant (REPLACE_ONE)"
    rigorous = True
    sampling = Sampling.WITHOUT_REPLACEMENT
    adjacency = Adjacency.REPLACE_ONE
    formula = (
        r"\varepsilon'(\alpha)\le\frac{1}{\alpha-1}\log\Big(1+\gamma^2\binom{\alpha}{2}\min\{4(e^{\varepsilon(2)}-1),2e^{\varepsilon(2)}\}"
        r"+\sum_{j\ge3}\gamma^j\binom{\alpha}{j}\min\{4\sqrt{B_{2\lfloor j/2\rfloor}B_{2\lceil j/2\rceil}},\,2e^{(j-1)\varepsilon(j)}\}\Big)"
    )
    explanation = (
        "The same release as DPMix/DP-CDA, accounted with the strongest published analysis for "
        "sampling without replacement (as implemented by Google's dp_accounting)."
    )

    def __init__(self, *, orders: tuple[int, ...] = WOR_ORDERS) -> None:
        self.orders = orders

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        if setting.clip is not None:
            return DataBounds.clipped_one_hot(setting.clip)
        return DataBounds.unit_box(setting.dx, setting.dy)

    def _compute(self, release: MixingRelease, delta: float):
        eps, order = _rdp_epsilon(release, delta, self.orders, rdp.NeighborRel.REPLACE_ONE)
        return eps, order, (("noise_multiplier", release.noise_multiplier()),), None
