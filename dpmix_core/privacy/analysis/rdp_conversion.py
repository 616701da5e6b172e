"""RDP -> (eps, delta)-DP conversion."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["classic_rdp_to_dp"]


def classic_rdp_to_dp(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """eps = min_alpha rdp(alpha) + log(1/delta)/(alpha-1) (Mironov 2017, Prop. 3); returns (eps, alpha*)."""
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1). Found {delta}.")
    eps = rdp + math.log(1.0 / delta) / (orders - 1.0)
    eps = np.where(np.isnan(eps), np.inf, eps)
    best = int(np.argmin(eps))
    return float(eps[best]), float(orders[best])
