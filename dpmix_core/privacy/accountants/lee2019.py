"""DPMix accountant as published (Lee et al., ISIT 2019; BUET thesis Fig. 3.1)."""

from __future__ import annotations

import numpy as np

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.accountants.extremes import settled_by_noise
from dpmix_core.privacy.accountants.wbk import wbk_epsilon
from dpmix_core.privacy.events import AccountedRelease
from dpmix_core.privacy.release import Adjacency, DataBounds, Sampling


class Lee2019Accountant(Accountant):
    """WBK subsampled-RDP bound with gamma = l/n, classic conversion, alpha in {2..100}.

    Data in [0,1]^dx and labels in [0,1]^dy, so under replace-one
    Delta_x^2 = dx/l^2 and Delta_y^2 = dy/l^2. Reproduces the thesis: n=60000,
    l=256, T=10000, sigma=0.0711, delta=1/n gives eps = 15.00.

    Known pitfall: the thesis code uses gamma = 1/n instead of the paper's l/n,
    which reports eps = 1.42 for the same release, an ~10x understatement.
    """

    accepts_events = False  # the paper's closed form, stated for mixing releases
    name = "lee2019"
    title = "DPMix (Lee et al. 2019), as published"
    reference = "Lee et al., ISIT 2019, Thm. 1; Wang-Balle-Kasiviswanathan 2019, Thm. 9"
    rigorous = True
    sampling = Sampling.WITHOUT_REPLACEMENT
    adjacency = Adjacency.REPLACE_ONE
    orders = np.arange(2, 101)
    formula = (
        r"\varepsilon(\alpha)=\frac{\alpha}{2}\Big(\frac{d_x}{\ell^2\sigma_x^2}+\frac{d_y}{\ell^2\sigma_y^2}\Big),\ "
        r"\gamma=\frac{\ell}{n},\ "
        r"\varepsilon=\min_{\alpha\in\{2..100\}} T\,\varepsilon'_{\mathrm{WBK}}(\alpha)+\frac{\log(1/\delta)}{\alpha-1}"
    )
    explanation = (
        "Each point averages l distinct records, so one person moves it by at most sqrt(d)/l. "
        "Picking l of n records at random hides whether you were used (amplification by subsampling), "
        "and T releases add up (composition). The paper's bound, converted to (eps, delta) the classic way."
    )

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.unit_box(setting.dx, setting.dy)

    def _compute(self, release: AccountedRelease, delta: float):
        if (settled := settled_by_noise(release, delta)) is not None:
            return settled
        eps, order = wbk_epsilon(release, delta, self.orders)
        return eps, order, (), None
