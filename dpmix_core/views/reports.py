"""Tables and curves for the dashboard and scripts: plain data, no UI."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dpmix_core.privacy.accountant_names import CALIBRATION_ORDER
from dpmix_core.privacy.accountants import ACCOUNTANTS, EpsilonResult, MixingSetting, get_accountant, signed_gap
from dpmix_core.privacy.curves import Axis, default_axis_values, epsilon_curve
from dpmix_core.privacy.profile import (
    PrivacyProfile,
    gdp_mu_for,
    gdp_tradeoff,
    privacy_profile,
    tradeoff_from_profile,
)
from dpmix_core.privacy.release import MixingRelease, NormBound, Sampling
from dpmix_core.views.privacy_scale import format_epsilon, qualitative_label
from dpmix_core.views.release_models import RELEASE_MODEL_NAMES, RELEASE_MODELS

__all__ = [
    "AccountantInfo",
    "accountant_info",
    "curve_anchor",
    "curve_waiting_text",
    "epsilon_curves",
    "epsilon_table",
    "format_epsilon",
    "model_accountants",
    "no_headline_text",
    "NO_ACCOUNTANT",
    "ReleaseReading",
    "release_model_of",
    "release_reading",
    "OTHER_RELEASE",
    "RELEASE_MODELS",
]


def _in_model(release: MixingRelease, model: str) -> bool:
    """Which release model a release belongs to: sampling and the data bounds (different releases)."""
    if model == "poisson":
        return release.sampling is Sampling.POISSON
    if release.sampling is not Sampling.WITHOUT_REPLACEMENT:
        return False
    if release.bounds.x.description.startswith("[0,1]"):
        return model == "dpmix"
    return model == ("dpcda" if release.bounds.y == NormBound.one_hot() else "dpmix-clip")


CURVE_POINTS = 20  # points per curve: enough for a smooth log-log line, cheap enough for a live page


def _options(name: str, pld_accuracy: float, **pld_extra: float) -> dict:
    return {"relative_accuracy": pld_accuracy, **pld_extra} if name == "pld-poisson" else {}


def _variants(setting: MixingSetting, model: str | None = None) -> list[tuple[str, str, MixingSetting]]:
    """(row label, accountant, setting): rdp-wor is shown for each without-replacement bound model asked for.

    rdp-wor is the tight counterpart of lee2019 ([0,1]^d) and of dpcda (clip c);
    with a clip set we show both so each published number sits next to its tight one.
    It is the only accountant of uniform mixing on clipped records (||x|| <= Cx,
    ||y|| <= Cy, DPFMix App. E.3), shown when the setting or the chosen ``model`` is that.
    """
    rows = []
    for name in ACCOUNTANTS:
        if name != "rdp-wor":
            rows.append((name, name, setting))
            continue
        rows.append(("rdp-wor", name, replace(setting, clip=None, clip_records=False)))
        if setting.clip is not None:
            rows.append(("rdp-wor (clipped)", name, replace(setting, clip_records=False)))
        if setting.class_sizes is None and (setting.clip_records or model == "dpmix-clip"):
            rows.append(("rdp-wor (clipped x, y)", name, replace(setting, clip=None, clip_records=True)))
    return rows


def model_accountants(setting: MixingSetting, model: str) -> dict[str, MixingSetting]:
    """The accountants that analyse the release of ``model`` from this what-if, each with the setting it analyses
    it from (rdp-wor's bounds follow the model), in :data:`CALIBRATION_ORDER` (the tightest rigorous bound first, so
    a calibration starts from the least noise); empty when none does (e.g. clipped records, class-centric)."""
    _check_model(model)
    found = {
        name: variant
        for _, name, variant in _variants(setting, model)
        if _in_model(get_accountant(name).release_for(variant), model)
    }
    return {name: found[name] for name in sorted(found, key=CALIBRATION_ORDER.index)}


def _check_model(model: str | None) -> None:
    if model is not None and model not in RELEASE_MODELS:
        raise ValueError(f"Unknown release model {model!r}. Choose one of: {', '.join(RELEASE_MODELS)}.")


@functools.lru_cache(maxsize=256)
def _epsilon(name: str, pld_accuracy: float, variant: MixingSetting, delta: float) -> EpsilonResult:
    """One accountant's epsilon for one setting, remembered: the table and the headline ask for the same ones."""
    acc = get_accountant(name, **_options(name, pld_accuracy))
    return acc.epsilon(acc.release_for(variant), delta)


def release_model_of(release: MixingRelease) -> str:
    """The release model (a key of :data:`RELEASE_MODELS`) whose release an accountant analysed."""
    return next(m for m in RELEASE_MODELS if _in_model(release, m))


# Why a release model has no headline at all (no accountant analyses it with these options), not "too little noise"
NO_ACCOUNTANT = (
    "no accountant analyses this release model with these options (clipped records ‖x‖ ≤ Cx, ‖y‖ ≤ Cy are "
    "analysed for uniform mixing, not class-centric mixing)"
)
OTHER_RELEASE = "not for the chosen release model"  # a guarantee of another release (other sampling or data bound)


def _release_analysed(name: str, pld_accuracy: float, variant: MixingSetting) -> str:
    """The release model whose release accountant ``name`` analyses from the what-if ``variant``."""
    return release_model_of(get_accountant(name, **_options(name, pld_accuracy)).release_for(variant))


def epsilon_table(
    setting: MixingSetting, delta: float, *, pld_accuracy: float = 0.1, model: str | None = None
) -> pd.DataFrame:
    """One row per accountant: epsilon, the release it analysed, what it assumes and whether it is a guarantee.

    With ``model`` (a release model the user chose) the rows of that model come first, and a row about another
    release says so in its guarantee: its bound holds for that release, not the chosen one.
    """
    _check_model(model)
    rows = []
    for label, name, variant in _variants(setting, model):
        r = _epsilon(name, pld_accuracy, variant, delta)
        analysed = _release_analysed(name, pld_accuracy, variant)
        guarantee = r.guarantee if model in (None, analysed) else f"{r.guarantee}, {OTHER_RELEASE}"
        notes = [r.reason] if r.reason else []
        details = dict(r.details)
        if "discretization" in details:
            notes.append(f"PLD grid h = {details['discretization']:.2g} (pessimistic rounding)")
        if "mu" in details and math.isfinite(details["mu"]):
            notes.append(f"mu = {details['mu']:.4g}")
        if r.order is not None:
            notes.append(f"best RDP order alpha = {r.order:g}")
        error_bar = ""
        if "epsilon_optimistic" in details and math.isfinite(r.epsilon) and "fallback_rdp" not in details:
            low, grid = details["epsilon_optimistic"], details.get("grid_error_estimate", math.nan)
            if low > 0:  # prv_accountant style: optimistic estimate .. rigorous bound
                error_bar = f"[{low:.4g}, {r.epsilon:.4g}]"
            elif math.isfinite(grid):
                error_bar = f"≤ {r.epsilon:.4g} (grid error ~ {grid:.2g})"
        rows.append(
            {
                "accountant": label,
                "epsilon": r.epsilon,
                "ε": format_epsilon(r.epsilon, upper_bound=r.upper_bound),
                "release analysed": RELEASE_MODEL_NAMES[analysed] + (" (chosen)" if analysed == model else ""),
                "PLD error bar": error_bar,
                "δ": f"{r.delta:.2g}",
                "guarantee": guarantee,
                "upper_bound": r.upper_bound,
                "protection": qualitative_label(r.epsilon),
                "sampling / adjacency": f"{r.sampling} / {r.adjacency}",
                "assumptions": r.assumptions,
                "notes": "; ".join(notes),
                "reference": r.reference,
            }
        )
    table = _with_clt_gap(pd.DataFrame(rows))
    if model is None:
        return table
    chosen = table["release analysed"].str.endswith("(chosen)")
    return pd.concat([table[chosen], table[~chosen]], ignore_index=True)


def _with_clt_gap(table: pd.DataFrame) -> pd.DataFrame:
    """gdp-clt's row says how far it is from pld-poisson on the same release (signed; < 0: too optimistic)."""
    by_name = table.set_index("accountant")["epsilon"]
    if "gdp-clt" in by_name and "pld-poisson" in by_name:
        clt, exact = float(by_name["gdp-clt"]), float(by_name["pld-poisson"])
        if math.isfinite(clt) and math.isfinite(exact):
            gap = signed_gap(clt, exact)
            word = "below" if gap < 0 else "above"
            note = (
                f"signed gap to pld-poisson (exact, same release): {gap:+.3g} "
                f"({abs(gap) / exact:.0%} {word} the rigorous value)"
                if exact > 0
                else f"gap {gap:+.3g}"
            )
            i = table.index[table["accountant"] == "gdp-clt"][0]
            table.loc[i, "notes"] = "; ".join(x for x in (note, table.loc[i, "notes"]) if x)
    return table


def curve_anchor(setting: MixingSetting, axis: Axis) -> MixingSetting:
    """What a curve along ``axis`` depends on: the setting with the axis's own knob snapped to its decade.

    The curve sets that knob at every grid point, so its current value matters only through the grid's
    range; snapping it (sigma to the nearest power of ten, T up to the next one, l to 1) lets a cache reuse
    the curve while the knob moves within a decade, and only the "current" marker moves.
    """
    if axis == "sigma":
        anchor = 10.0 ** round(math.log10(max(setting.sigma_x, 1e-4)))
        return replace(setting, sigma_x=anchor, sigma_y=anchor)
    if axis == "T":
        return replace(setting, T=int(10 ** math.ceil(math.log10(setting.T))))
    return replace(setting, l=1)


def curve_waiting_text(along: str, ahead: int) -> str:
    """What a page shows while its curve along ``along`` waits behind ``ahead`` other requests (0: computing)."""
    if ahead < 0:
        raise ValueError(f"ahead must be >= 0. Found {ahead}.")
    if ahead == 0:
        when = "(a second or two)"
    else:
        curves, are = ("curve", "is") if ahead == 1 else ("curves", "are")
        when = (
            f"once {ahead} other {curves} ahead of it {are} done (other users of this server, or a setting just left)"
        )
    return f"Computing ε along {along} for this release {when}; the table above is current."


def epsilon_curves(
    setting: MixingSetting,
    delta: float,
    *,
    axis: Axis,
    values: Sequence[float] | None = None,
    sigma_ratio: float = 1.0,
    accountants: Sequence[str] | None = None,
    pld_accuracy: float = 0.2,
    model: str | None = None,
) -> pd.DataFrame:
    """Long table (accountant, axis value, epsilon, upper_bound, release analysed, chosen) for plotting; one curve
    per row of :func:`epsilon_table` with the same ``model``. ``chosen``: the accountant analyses the release of
    ``model`` (every curve when ``model`` is None); the others bound another release, as the table says.

    Curves use pld-poisson's first grid (no refinement budget): still a rigorous upper bound at every
    point, a little looser than the table's refined value, and about five times faster for a live page.
    """
    _check_model(model)
    values = list(values) if values is not None else default_axis_values(setting, axis, points=CURVE_POINTS)
    rows = []
    for label, name, variant in _variants(setting, model):
        if accountants is not None and name not in accountants:
            continue
        analysed = _release_analysed(name, pld_accuracy, variant)
        results = epsilon_curve(
            name,
            variant,
            delta=delta,
            axis=axis,
            values=values,
            sigma_ratio=sigma_ratio,
            **_options(name, pld_accuracy, work_cap=0.0),
        )
        for value, r in zip(values, results):
            rows.append(
                {
                    "accountant": label,
                    axis: value,
                    "epsilon": r.epsilon,
                    "upper_bound": r.upper_bound,
                    "guarantee": r.guarantee,
                    "release analysed": RELEASE_MODEL_NAMES[analysed],
                    "chosen": model in (None, analysed),
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class AccountantInfo:
    name: str
    title: str
    formula: str
    explanation: str
    reference: str
    guarantee: str
    sampling: str
    adjacency: str


def accountant_info() -> list[AccountantInfo]:
    """Static descriptions for the page's explanations."""
    return [
        AccountantInfo(
            name=cls.name,
            title=cls.title,
            formula=cls.formula,
            explanation=cls.explanation,
            reference=cls.reference,
            guarantee="rigorous upper bound" if cls.rigorous else "approximation (not an upper bound)",
            sampling=cls.sampling.value,
            adjacency=cls.adjacency.value,
        )
        for cls in ACCOUNTANTS.values()
    ]


@dataclass(frozen=True)
class ReleaseReading:
    """The headline of one release model: its tightest rigorous epsilon and what an attacker can do."""

    model: str
    accountant: str | None  # None: no rigorous bound for this release (not covered, or none finite)
    epsilon: float
    delta: float
    guarantee: str
    profile: PrivacyProfile | None
    alphas: tuple[float, ...]
    beta_bound: tuple[float, ...]  # lower bound on the best test's type II error at each alpha
    gdp_mu: float  # reference: mu-GDP with the same delta at this epsilon
    gdp_beta: tuple[float, ...]
    release: MixingRelease | None = None  # the release the headline accountant analysed
    result: EpsilonResult | None = None  # the headline accountant's result on it


def _why_no_headline(analysed: dict[str, MixingSetting], setting: MixingSetting) -> str:
    if not analysed:
        return NO_ACCOUNTANT
    if setting.not_covered is not None:
        return f"not covered: {setting.not_covered}"
    return "no rigorous bound for this release"


def no_headline_text(reading: ReleaseReading) -> str:
    """Why a release model has no headline epsilon, in one sentence (only when ``reading.accountant`` is None):
    no accountant analyses it, the release is not covered, or every bound is infinite (too little noise)."""
    if reading.guarantee == NO_ACCOUNTANT:
        return f"No headline: {NO_ACCOUNTANT}."
    if reading.guarantee.startswith("not covered"):
        return f"No ε is an upper bound for this release ({reading.guarantee})."
    return "No accountant gives a finite rigorous bound for this release (too little noise)."


def release_reading(
    setting: MixingSetting,
    delta: float,
    model: str,
    *,
    pld_accuracy: float = 0.2,
    points: int = 60,
    with_curves: bool = True,
) -> ReleaseReading:
    """The tightest rigorous epsilon among the accountants of one release model, its privacy profile
    (RDP of the release's dp_accounting event) and the f-DP trade-off curve it implies."""
    best = None
    analysed = model_accountants(setting, model)  # refuses an unknown model
    for name, variant in analysed.items():
        release = get_accountant(name, **_options(name, pld_accuracy)).release_for(variant)
        r = _epsilon(name, pld_accuracy, variant, delta)
        if r.upper_bound and (best is None or r.epsilon < best[0].epsilon):
            best = (r, release)
    alphas = tuple(float(a) for a in np.linspace(0.0, 1.0, points + 1))
    if best is None or not math.isfinite(best[0].epsilon):
        return ReleaseReading(
            model,
            None,
            math.inf,
            delta,
            _why_no_headline(analysed, setting),
            None,
            alphas,
            tuple(0.0 for _ in alphas),
            math.inf,
            tuple(0.0 for _ in alphas),
        )
    result, release = best
    if not with_curves:  # the headline alone: no profile (its RDP composition costs ~0.2 s per release)
        empty = tuple(0.0 for _ in alphas)
        return ReleaseReading(
            model,
            result.accountant,
            result.epsilon,
            delta,
            result.guarantee,
            None,
            alphas,
            empty,
            math.nan,
            empty,
            release,
            result,
        )
    eps_grid = np.linspace(0.0, max(3 * result.epsilon, 1.0), points)
    profile = privacy_profile(release, eps_grid)
    beta = tradeoff_from_profile(profile, alphas)
    mu = gdp_mu_for(result.epsilon, delta)
    gdp = gdp_tradeoff(mu, alphas) if math.isfinite(mu) else np.zeros(len(alphas))
    return ReleaseReading(
        model,
        result.accountant,
        result.epsilon,
        delta,
        result.guarantee,
        profile,
        alphas,
        tuple(float(b) for b in beta),
        mu,
        tuple(float(g) for g in gdp),
        release,
        result,
    )
