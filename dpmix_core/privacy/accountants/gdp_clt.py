"""DPFMix's Gaussian-DP accountant via the central limit theorem (Li, Cao, Yao 2022)."""

from __future__ import annotations

import math

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.accountants.extremes import Z_HUGE, Z_TINY, settled_by_noise
from dpmix_core.privacy.analysis.gdp import gdp_epsilon, poisson_clt_mu
from dpmix_core.privacy.events import AccountedRelease
from dpmix_core.privacy.release import Adjacency, DataBounds, Sampling


class GdpCltAccountant(Accountant):
    """mu = (m sqrt(T)/n) sqrt(exp(1/z_x^2 + 1/z_y^2) - 1), then the mu-GDP (eps, delta) curve.

    DPFMix Thm. 2.1 and Lemma 2.2 with z_x = sigma_x m / C_x, z_y = sigma_y m / C_y.
    The CLT is an asymptotic approximation (T -> inf, q sqrt(T) fixed); it is
    *not* an upper bound and is typically optimistic: compare with pld-poisson.
    """

    name = "gdp-clt"
    title = "DPFMix Gaussian-DP (CLT)"
    reference = "Li, Cao, Yao 2022 (DPFMix), Thm. 2.1, Lemma 2.2; Bu, Dong, Long, Su 2020, Thm. 5"
    rigorous = False
    sampling = Sampling.POISSON
    adjacency = Adjacency.ADD_REMOVE_ONE
    formula = (
        r"\mu=\frac{m\sqrt{T}}{n}\sqrt{e^{1/z_x^2+1/z_y^2}-1},\ z_x=\frac{\sigma_x m}{C_x},\ z_y=\frac{\sigma_y m}{C_y},\ "
        r"\delta(\varepsilon)=\Phi\big(-\tfrac{\varepsilon}{\mu}+\tfrac{\mu}{2}\big)-e^{\varepsilon}\Phi\big(-\tfrac{\varepsilon}{\mu}-\tfrac{\mu}{2}\big)"
    )
    explanation = (
        "Each record joins each point with probability m/n. For many points the privacy loss is "
        "approximately Gaussian (central limit theorem), summarised by one number mu. Fast and "
        "elegant, but an approximation: it can understate epsilon."
    )

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.clipped(setting.clip_x, setting.clip_y)

    def _compute(self, release: AccountedRelease, delta: float):
        z = release.noise_multiplier()
        # the CLT's own number wherever it is computable (the gap to pld-poisson is shown next to it);
        # the total-variation answer only where the formula leaves the double range
        if not Z_TINY < z < Z_HUGE and (settled := settled_by_noise(release, delta)) is not None:
            return settled
        mu = poisson_clt_mu(release.sampling_rate, release.num_points, release.noise_multiplier())
        if math.isinf(mu):
            return math.inf, None, (("mu", mu),), "mu overflows: noise far too small for the CLT"
        return gdp_epsilon(delta, mu), None, (("mu", mu), ("noise_multiplier", release.noise_multiplier())), None
