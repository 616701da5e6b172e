"""A release file's privacy card read back: in one line a person can read (the Train & trade-offs page's release
mode), and as the accountant page's what-if (``report --release``, the page's "Open a release's card")."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dpmix_core.experiments.release_files import (
    ReleaseFile,
    card_epsilon,
    card_from_upload,
    card_synthesis,
    release_synthesis,
    verify_card,
)
from dpmix_core.privacy.accountants import MixingSetting, get_accountant
from dpmix_core.privacy.release import Mechanism
from dpmix_core.views.privacy_scale import format_epsilon
from dpmix_core.views.reports import model_accountants, release_model_of

__all__ = [
    "CardReading",
    "card_data_note",
    "card_setting",
    "read_card_upload",
    "release_summary",
    "search_note",
    "with_card_data",
]


def release_summary(release: ReleaseFile) -> str:
    """Dataset, mechanism, size, noise, then the card's epsilons: its upper bounds first, then what is not one."""
    card = release.card
    syn = release_synthesis(card, where=f"the card of {release.path!r}")

    def text(entry: dict) -> str:
        eps = card_epsilon(entry.get("epsilon"))
        return f"{entry['accountant']} {'?' if eps is None else format_epsilon(eps)}"

    bounds = [text(e) for e in card["epsilons"] if e.get("upper_bound")]
    others = [text(e) for e in card["epsilons"] if not e.get("upper_bound")]
    eps = f"ε upper bounds at δ = {card['delta']:g}: {', '.join(bounds) or 'none'}"
    if others:
        eps += f" (not upper bounds: {', '.join(others)})"
    if note := search_note(card):
        eps += f" — {note}"
    return (
        f"{card['dataset'].get('name')} · {syn.mechanism}, {syn.features} · T = {release.num_points:,} points of "
        f"{release.x.shape[1]:,} values · σx = {syn.sigma_x:.4g}, σy = {syn.sigma_y:.4g} · {eps}"
    )


def card_setting(card: dict) -> tuple[MixingSetting, str]:
    """The accountant page's what-if (setting, release model) whose release is the card's, exactly.

    The card must verify (:func:`~dpmix_core.experiments.release_files.verify_card`: its description follows from
    its parameters and every epsilon on it is this version's). ValueError, with the reason, when it does not, when
    the release is not a mixing release (label-only Laplace), or when no accountant of the model rebuilds the
    card's release from the setting (post-processing flags aside: hard labels, clamping, which change no epsilon).
    """
    check = verify_card(card)
    if check.release is None and check.matches:  # label-only Laplace: no mixing, epsilon is its parameter
        raise ValueError(f"not a mixing release ({check.reason[:1].lower()}{check.reason[1:-1]})")
    if check.release is None or not check.matches:
        raise ValueError(f"the card does not verify: {check.reason}")
    release = check.release
    syn = card_synthesis(card)
    class_centric = release.mechanism is Mechanism.CLASS_CENTRIC
    setting = MixingSetting(
        n=release.n,
        l=release.mix_degree,
        T=release.num_points,
        sigma_x=release.sigma_x,
        sigma_y=release.sigma_y,
        dx=int(card["released"]["feature_dim"]),
        dy=int(card["released"]["label_dim"]),
        clip=syn.clip if class_centric and release.preprocessing in ("zscore", "zscore-private") else None,
        clip_x=syn.clip_x,
        clip_y=syn.clip_y,
        class_sizes=release.class_sizes,
        protect_labels=release.protect_labels,
        not_covered=release.not_covered,
        clip_records=release.mechanism is Mechanism.DPMIX and release.preprocessing == "clip",
        feature_transform=release.feature_transform,
    )
    model = release_model_of(release)
    wanted = _accounted(release.to_json())
    if not any(
        _accounted(get_accountant(name).release_for(variant).to_json()) == wanted
        for name, variant in model_accountants(setting, model).items()
    ):
        raise ValueError(f"no accountant of the {model} release model describes this {syn.mechanism} release")
    return setting, model


def _accounted(described: dict) -> dict:
    """A release's description without its post-processing (hard labels, clamping: no epsilon changes)."""
    return {k: v for k, v in described.items() if k not in ("hard_labels", "clamp_negative")}


def with_card_data(setting: MixingSetting, card: MixingSetting) -> tuple[MixingSetting, bool]:
    """(``setting`` with what the page's controls cannot hold taken from a loaded card's setting, whether it was).

    The accountant page's controls describe K equal classes and no feature transform. While they still describe
    the card's data (the card's n and dx; class-centric exactly when the card is, with its number of classes), a
    what-if keeps the card's own class sizes and feature transform, so the card's release reads exactly as on its
    card; once n, K, dx or the mixing change, it is the controls' release alone (equal classes, pixels).
    """
    same_classes = (setting.class_sizes is None) == (card.class_sizes is None) and (
        card.class_sizes is None or len(card.class_sizes) == len(setting.class_sizes or ())
    )
    if setting.n != card.n or setting.dx != card.dx or not same_classes:
        return setting, False
    return replace(setting, class_sizes=card.class_sizes, feature_transform=card.feature_transform), True


def card_data_note(name: str, setting: MixingSetting, kept: bool) -> str:
    """Under the accountant page's controls: whose release they show, and what of the card's they keep (its class
    sizes, its feature transform) or why not (:func:`with_card_data`)."""
    if not kept:
        return (
            f"From the card of {name}: n, dx or the classes changed, so this is the controls' release (equal classes)."
        )
    held = []
    if setting.class_sizes is not None and len(set(setting.class_sizes)) > 1:
        held.append(f"its class sizes {', '.join(f'{c:,}' for c in setting.class_sizes)}")
    if setting.feature_transform != "pixels":
        held.append(f"what it mixed: {setting.feature_transform}")
    return f"From the card of {name}" + (f" ({' and '.join(held)} kept)." if held else ".")


@dataclass(frozen=True)
class CardReading:
    """An uploaded card as the accountant page's controls take it: the what-if, its release model, λ = σy / σx and
    δ (the card's)."""

    setting: MixingSetting
    model: str
    sigma_ratio: float
    delta: float
    chosen_note: str | None = None  # chosen by a search, or bounds released with it: what covers what is published


def search_note(card: dict) -> str | None:
    """What the card's epsilon does not cover by itself, in sentences: the release was chosen by a best-release
    search (its ``search`` section: what is published is certified at the search's epsilon), and/or its bounds were
    released privately with it (its ``feature_ranges`` section: the points and the ranges together are certified at
    the card's epsilon; an accountant of the release's parameters reads the points alone). None when neither."""
    notes = []
    search = card.get("search")
    if isinstance(search, dict) and search.get("search_epsilon") is not None:
        notes.append(
            f"This release was chosen among {search.get('candidates', '?')} candidate releases of the same data: what "
            f"is published (the release and the fact that it was chosen) is certified at ε "
            f"{format_epsilon(float(search['search_epsilon']))} (δ = {search.get('delta', card['delta']):g}). The ε "
            "here is this release's alone."
        )
    ranges = card.get("feature_ranges")
    if isinstance(ranges, dict) and card_epsilon(ranges.get("total_epsilon")) is not None:
        notes.append(
            f"The bounds of this release's features were released privately with it (ε {ranges.get('epsilon')} "
            f"alone): the points and the ranges together are certified at ε "
            f"{format_epsilon(float(ranges['total_epsilon']))} (δ = {card['delta']:g}). An accountant's ε of the "
            "release's parameters covers the points alone."
        )
    return " ".join(notes) or None


def read_card_upload(data: bytes, filename: str) -> CardReading:
    """A ``FILE.card.json`` or release ``FILE.npz`` upload read into the accountant page's controls
    (:func:`card_setting`: it must verify); ValueError (one line) otherwise."""
    card = card_from_upload(data, filename)
    setting, model = card_setting(card)
    ratio = setting.sigma_y / setting.sigma_x if setting.sigma_x > 0 else 1.0
    return CardReading(setting, model, ratio, float(card["delta"]), search_note(card))
