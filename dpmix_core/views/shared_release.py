"""The release last set on one page, offered to the others: a typed value instead of an untyped dict."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpmix_core.privacy.accountants import MixingSetting
from dpmix_core.privacy.checks import check_delta, check_positive_int, check_sigma

__all__ = ["SHARED_RELEASE_KEY", "SharedRelease"]

SHARED_RELEASE_KEY = "shared_release"  # a plain session key: survives page switches (widget state does not)


@dataclass(frozen=True)
class SharedRelease:
    """Sizes and noise of a release; ``mechanism`` the mechanism that makes it ("dpmix", "poisson", ...), or None
    when the page that set it names none (the accountant page's DP-CDA model, which no other page makes).

    ``clip`` = (Cx, Cy): the records were clipped to ||x|| <= Cx and ||y|| <= Cy before mixing (Poisson mixing, and
    DPMix on clipped records, DPFMix App. E.3); None: DPMix's records in [0,1], or no mechanism named. A page that
    takes the release accounts it on these bounds, so the same sizes and noise give the same epsilon there.
    """

    page: str
    n: int
    l: int
    T: int
    sigma_x: float
    sigma_y: float
    delta: float
    mechanism: str | None = None
    clip: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name in ("n", "l", "T"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        object.__setattr__(self, "sigma_x", check_sigma("sigma_x", self.sigma_x))
        object.__setattr__(self, "sigma_y", check_sigma("sigma_y", self.sigma_y))
        object.__setattr__(self, "delta", check_delta(self.delta))
        if self.clip is not None:
            if len(self.clip) != 2 or not all(_is_bound(c) for c in self.clip):
                raise ValueError(f"clip must be two positive finite bounds (Cx, Cy). Found {self.clip!r}.")
            object.__setattr__(self, "clip", (float(self.clip[0]), float(self.clip[1])))
        elif self.mechanism == "poisson":
            raise ValueError("a Poisson mixing release clips its records: give clip = (Cx, Cy).")

    @classmethod
    def of_model(cls, page: str, setting: MixingSetting, delta: float, model: str) -> SharedRelease:
        """The release a headline's release model (``views.release_models``) speaks for: uniform mixing is "dpmix"
        (records clipped to (Cx, Cy) under "dpmix-clip"), "poisson" clipped to (Cx, Cy), class-centric mixing
        "class-centric"; DP-CDA's model names no mechanism (no other page makes its release)."""
        if setting.class_sizes is not None:
            mechanism: str | None = "class-centric"
        else:
            mechanism = {"dpmix": "dpmix", "dpmix-clip": "dpmix", "poisson": "poisson"}.get(model)
        clipped = model in ("poisson", "dpmix-clip") and mechanism != "class-centric"
        return cls(
            page=page,
            n=setting.n,
            l=setting.l,
            T=setting.T,
            sigma_x=setting.sigma_x,
            sigma_y=setting.sigma_y,
            delta=delta,
            mechanism=mechanism,
            clip=(setting.clip_x, setting.clip_y) if clipped else None,
        )

    def label(self) -> str:
        """A button label: where it comes from and what it is."""
        bounds = f", ‖x‖ ≤ {self.clip[0]:g}, ‖y‖ ≤ {self.clip[1]:g}" if self.clip is not None else ""
        return f"the {self.page} page (ℓ = {self.l}, T = {self.T:,}, σx = {self.sigma_x:.3g}{bounds})"


def _is_bound(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
