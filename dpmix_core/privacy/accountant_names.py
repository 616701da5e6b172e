"""The accountants' names, importable without loading them.

``dpmix_core.privacy.accountants`` pulls in dp_accounting and scipy (about a second);
the command line builds its parser and checks ``--accountant`` from this tuple
and loads the accountants only when a command computes an epsilon. A test
checks that it lists exactly ``dpmix_core.privacy.accountants.ACCOUNTANTS``, in order,
that ``ACCOUNTANT_SAMPLING`` is each one's ``sampling`` (the ``Sampling`` values) and that
``RIGOROUS_ACCOUNTANTS`` are the ones whose ``rigorous`` is true.
"""

from __future__ import annotations

__all__ = ["ACCOUNTANT_NAMES", "ACCOUNTANT_SAMPLING", "CALIBRATION_ORDER", "RIGOROUS_ACCOUNTANTS"]

ACCOUNTANT_NAMES: tuple[str, ...] = ("lee2019", "dpcda", "gdp-clt", "rdp-poisson", "pld-poisson", "rdp-wor")

# the sampling scheme each accountant analyses: which releases it can calibrate (synthesis.calibration_accountants)
ACCOUNTANT_SAMPLING: dict[str, str] = {
    "lee2019": "without-replacement",
    "dpcda": "without-replacement",
    "gdp-clt": "poisson",
    "rdp-poisson": "poisson",
    "pld-poisson": "poisson",
    "rdp-wor": "without-replacement",
}

# the accountants whose epsilon is an upper bound (of a release they cover): all but the CLT approximation
RIGOROUS_ACCOUNTANTS: frozenset[str] = frozenset({"lee2019", "dpcda", "rdp-poisson", "pld-poisson", "rdp-wor"})

# the order in which accountants are offered to calibrate sigma: the tightest rigorous bound of each sampling first
# (pld-poisson, rdp-wor), the papers' own after them, the CLT approximation last
CALIBRATION_ORDER: tuple[str, ...] = ("pld-poisson", "rdp-wor", "rdp-poisson", "lee2019", "dpcda", "gdp-clt")
