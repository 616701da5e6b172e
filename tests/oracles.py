"""Independent oracles shared by the accounting tests (high-precision mpmath, no dpmix_core code)."""

import mpmath


def mp_poisson_rdp(q: float, z: float, alpha: int) -> float:
    """One step's RDP of the Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, Sec. 3.3), integer alpha,
    in 60-digit arithmetic."""
    with mpmath.workdps(60):
        q = mpmath.mpf(q)
        a = mpmath.fsum(
            mpmath.binomial(alpha, k)
            * (1 - q) ** (alpha - k)
            * q**k
            * mpmath.exp((k * k - k) / (2 * mpmath.mpf(z) ** 2))
            for k in range(alpha + 1)
        )
        return float(mpmath.log(a) / (alpha - 1))
