"""Epsilon as a function of one knob (sigma, T or l), for plots and sweeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from dpmix_core.privacy.accountants import EpsilonResult, MixingSetting, get_accountant
from dpmix_core.privacy.release import max_class_centric_l

Axis = Literal["sigma", "T", "l"]

__all__ = ["Axis", "epsilon_curve", "default_axis_values"]


def _at(setting: MixingSetting, axis: Axis, value: float, sigma_ratio: float) -> MixingSetting:
    if axis == "sigma":
        return replace(setting, sigma_x=float(value), sigma_y=float(value) * sigma_ratio)
    if axis == "T":
        return replace(setting, T=int(value))
    if axis == "l":
        return replace(setting, l=int(value))
    raise ValueError(f"Unknown axis {axis!r}; use 'sigma', 'T' or 'l'.")


def epsilon_curve(
    accountant: str,
    setting: MixingSetting,
    *,
    delta: float,
    axis: Axis,
    values: Sequence[float],
    sigma_ratio: float = 1.0,
    **options,
) -> list[EpsilonResult]:
    """epsilon of one accountant at each value of the axis (other knobs fixed).

    Args:
        accountant: the accountant's name (e.g. ``"rdp-wor"``, ``"pld-poisson"``); see ``get_accountant``.
        setting: the user's setting; every knob but the one on ``axis`` is taken from it.
        delta: the delta at which each epsilon is computed, in (0, 1).
        axis: the knob that varies: ``"sigma"`` (sigma_x, the noise standard deviation on each released
            average, with sigma_y = sigma_ratio * sigma_x), ``"T"`` (number of released points) or ``"l"``
            (mix degree; the expected batch size m for Poisson accountants).
        values: the knob's values, in the order the results come back (T and l are cast to int).
        sigma_ratio: lambda = sigma_y / sigma_x on the ``"sigma"`` axis (ignored on the others).
        **options: passed to the accountant's constructor (e.g. ``relative_accuracy`` for pld-poisson).

    Returns:
        One :class:`EpsilonResult` per value, in the order of ``values``.

    Raises:
        ValueError: an unknown accountant or axis, delta outside (0, 1), or a value that makes the setting
            invalid (e.g. l > n, or T or l < 1).
    """
    acc = get_accountant(accountant, **options)
    out = []
    for value in values:
        s = _at(setting, axis, value, sigma_ratio)
        out.append(acc.epsilon(acc.release_for(s), delta))
    return out


def default_axis_values(setting: MixingSetting, axis: Axis, points: int = 30) -> list[float]:
    """A sensible log-spaced grid around the current setting."""
    if axis == "sigma":
        centre = max(setting.sigma_x, 1e-4)
        return list(np.geomspace(centre / 10, centre * 10, points))
    if axis == "T":
        return sorted({int(v) for v in np.geomspace(1, max(10 * setting.T, 10), points)})
    # class-centric with labels protected needs l <= N_min - 1 (class_centric_release)
    smallest = max_class_centric_l(setting.class_sizes, setting.protect_labels) if setting.class_sizes else setting.n
    return sorted({int(v) for v in np.geomspace(1, smallest, points)})
