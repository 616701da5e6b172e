"""DP-CDA accountant as published (Saha, Tonoy, Imtiaz; Theorem 1)."""

from __future__ import annotations

import numpy as np

from dpmix_core.privacy.accountants.base import Accountant, MixingSetting
from dpmix_core.privacy.accountants.extremes import settled_by_noise
from dpmix_core.privacy.accountants.wbk import wbk_epsilon
from dpmix_core.privacy.events import AccountedRelease
from dpmix_core.privacy.release import Adjacency, DataBounds, Sampling


class DpcdaAccountant(Accountant):
    """eps(alpha) = alpha/l^2 (2c^2/sigma_x^2 + 1/sigma_y^2), WBK bound with gamma = l/N, alpha in {3..100}.

    Records z-scored and clipped to ||x|| <= c (replace-one: Delta_x = 2c/l) with
    one-hot labels (Delta_y = sqrt(2)/l); the bound is dimension-free. The paper
    prints B(ceil(j/2)) inside G(alpha); the source theorem (WBK 2019, Thm. 9) has
    B(2 ceil(j/2)), which we use: B of odd order is not a moment of the
    likelihood ratio and the printed version is not a valid bound.
    """

    accepts_events = False  # the paper's closed form, stated for mixing releases
    name = "dpcda"
    title = "DP-CDA (Saha et al.), as published"
    reference = "Saha, Tonoy, Imtiaz, DP-CDA, Thm. 1; Wang-Balle-Kasiviswanathan 2019, Thm. 9"
    rigorous = True
    sampling = Sampling.WITHOUT_REPLACEMENT
    adjacency = Adjacency.REPLACE_ONE
    orders = np.arange(3, 101)
    formula = (
        r"\varepsilon(\alpha)=\frac{\alpha}{\ell^2}\Big(\frac{2c^2}{\sigma_x^2}+\frac{1}{\sigma_y^2}\Big),\ "
        r"\gamma=\frac{\ell}{N},\ "
        r"\varepsilon=\min_{\alpha\in\{3..100\}} T\,\varepsilon'_{\mathrm{WBK}}(\alpha)+\frac{\log(1/\delta)}{\alpha-1}"
    )
    explanation = (
        "Like DPMix, but features are standardised and clipped to length c and labels are one-hot, "
        "so the bound does not grow with the image size."
    )

    def bounds_for(self, setting: MixingSetting) -> DataBounds:
        return DataBounds.clipped_one_hot(1.0 if setting.clip is None else setting.clip)

    def _compute(self, release: AccountedRelease, delta: float):
        if (settled := settled_by_noise(release, delta)) is not None:
            return settled
        eps, order = wbk_epsilon(release, delta, self.orders)
        return eps, order, (), None
