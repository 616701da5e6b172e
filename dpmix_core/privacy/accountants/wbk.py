"""Shared machinery of the two published without-replacement accountants (lee2019, dpcda)."""

from __future__ import annotations

import numpy as np

from dpmix_core.privacy.analysis.rdp_conversion import classic_rdp_to_dp
from dpmix_core.privacy.analysis.wbk_subsampling import wbk_subsampled_gaussian_rdp
from dpmix_core.privacy.events import AccountedRelease


def wbk_epsilon(release: AccountedRelease, delta: float, orders: np.ndarray) -> tuple[float, float]:
    """min_alpha T eps'(alpha) + log(1/delta)/(alpha-1) with eps' the WBK bound at gamma = l/n."""
    rdp = wbk_subsampled_gaussian_rdp(release.sampling_rate, release.gaussian_rdp_coefficient(), orders)
    return classic_rdp_to_dp(orders, release.num_points * rdp, delta)
