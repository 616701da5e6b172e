"""The release last set on one page, offered to the others: a typed value instead of an untyped dict."""

from __future__ import annotations

from dataclasses import dataclass

from dpmix_core.privacy.checks import check_delta, check_positive_int, check_sigma

__all__ = ["SHARED_RELEASE_KEY", "SharedRelease"]

SHARED_RELEASE_KEY = "shared_release"  # a plain session key: survives page switches (widget state does not)


@dataclass(frozen=True)
class SharedRelease:
    """Sizes and noise of a release; ``mechanism`` the mechanism that makes it ("dpmix", "poisson", ...), or None
    when the page that set it names none (the accountant page's DP-CDA model, which no other page makes)."""

    page: str
    n: int
    l: int
    T: int
    sigma_x: float
    sigma_y: float
    delta: float
    mechanism: str | None = None

    def __post_init__(self) -> None:
        for name in ("n", "l", "T"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        object.__setattr__(self, "sigma_x", check_sigma("sigma_x", self.sigma_x))
        object.__setattr__(self, "sigma_y", check_sigma("sigma_y", self.sigma_y))
        object.__setattr__(self, "delta", check_delta(self.delta))

    def label(self) -> str:
        """A button label: where it comes from and what it is."""
        return f"the {self.page} page (ℓ = {self.l}, T = {self.T:,}, σx = {self.sigma_x:.3g})"
