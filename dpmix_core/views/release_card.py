"""A release file's privacy card in one line a person can read (the Train & trade-offs page's release mode)."""

from __future__ import annotations

from dpmix_core.experiments.release_files import ReleaseFile, card_epsilon, release_synthesis
from dpmix_core.views.privacy_scale import format_epsilon

__all__ = ["release_summary"]


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
    return (
        f"{card['dataset'].get('name')} · {syn.mechanism}, {syn.features} · T = {release.num_points:,} points of "
        f"{release.x.shape[1]:,} values · σx = {syn.sigma_x:.4g}, σy = {syn.sigma_y:.4g} · {eps}"
    )
