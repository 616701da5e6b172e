"""What a mixed sample looks like: originals, the noise-free mixture and the released point, per class."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dpmix_core.data import Categories, Dataset
from dpmix_core.data.scattering import scattering_shape
from dpmix_core.privacy.accountants import EpsilonResult, applicable_accountants
from dpmix_core.privacy.checks import describe_feature_range
from dpmix_core.privacy.statement import tightest_statement
from dpmix_core.synthesis.pipeline import SynthesisConfig, config_ranges, planned_release, resolve_sigma, synthesize
from dpmix_core.synthesis.units import record_units, table_layout

__all__ = ["ClassPreview", "GROUPING", "MixingPreview", "PREVIEW_MECHANISMS", "feature_maps", "mixing_preview"]

PREVIEW_MECHANISMS = ("dpmix", "class-centric", "poisson", "local")

# how the preview sorts each mechanism's points into classes (said under the per-class pictures)
_MIXES_CLASSES = "A point mixes records of several classes: it is shown under the class with the largest label share."
GROUPING = {
    "dpmix": _MIXES_CLASSES,
    "poisson": _MIXES_CLASSES,
    "class-centric": "Every point mixes records of one class, shown under it.",
    "local": "Every point is one record plus noise, shown under its class.",
}


@dataclass(frozen=True)
class ClassPreview:
    label: str
    originals: np.ndarray  # images: (k, H, W) in [0, 1]; tabular data: (k, d) records as given
    clean: np.ndarray  # (m, H, W) noise-free mixtures scaled for display (feature maps: tiled); tabular: (m, d)
    noisy: np.ndarray  # (m, H, W) released points scaled for display (feature maps: tiled); tabular: (m, d)

    def rows(self, feature_names: tuple[str, ...] | None = None, categories: Categories = ()):
        """Tabular previews as one table: records, then noise-free mixtures, then released points. A text column of
        ``categories`` shows its word (the category with the largest share, as the released table writes it) before
        its one-hot shares."""
        import pandas as pd

        d = self.originals.shape[1]
        names = list(feature_names) if feature_names and len(feature_names) == d else [f"x{j}" for j in range(d)]
        parts = [("record", self.originals), ("noise-free mixture", self.clean), ("released", self.noisy)]
        frames = [pd.DataFrame(block, columns=names).assign(row=kind) for kind, block in parts if len(block)]
        table = pd.concat(frames, ignore_index=True)[["row", *names]]
        layout = table_layout(d, names, "", (), 0, categories)
        for at, idx, cats in layout.words:  # "row" stands where the header has the label; words go left to right
            shares = table[[names[j] for j in idx]].to_numpy()
            table.insert(at, layout.header[at], [cats[k] for k in shares.argmax(axis=1)])
        return table


@dataclass(frozen=True)
class MixingPreview:
    classes: tuple[ClassPreview, ...]
    epsilons: tuple[EpsilonResult, ...]  # for the full release of config.T points
    config: SynthesisConfig  # with the sigmas used
    notes: tuple[str, ...]
    caveats: tuple[str, ...]  # things the accountant does not cover
    display_note: str
    images: bool = True  # False: tabular records (rows of numbers), shown as tables
    statement: str | None = None  # the tightest guarantee in words, as the release's card will state it


def _display(images: np.ndarray, unit: bool) -> np.ndarray:
    """[0,1]-scaled data is clipped; z-scored or clipped features and tiled feature maps are min-max scaled per
    image over their values (the blank tiles of a feature grid, NaN, are drawn white)."""
    if unit:
        return np.clip(images, 0.0, 1.0)
    lo = np.nanmin(images, axis=(1, 2), keepdims=True)
    hi = np.nanmax(images, axis=(1, 2), keepdims=True)
    return np.nan_to_num((images - lo) / np.maximum(hi - lo, 1e-12), nan=1.0)


def feature_maps(rows: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Feature rows (m, C*h*w) as images (m, r*h, c*w): the C channel maps tiled in a near-square grid, blank-padded.

    ScatterNet on a 28 x 28 digit: 81 maps of 7 x 7 in a 9 x 9 grid, a 63 x 63 image per point.
    """
    channels, h, w = shape
    cols = math.ceil(math.sqrt(channels))
    grid_rows = math.ceil(channels / cols)
    maps = np.asarray(rows, dtype=np.float32).reshape(-1, channels, h, w)
    blank = np.full((maps.shape[0], grid_rows * cols - channels, h, w), np.nan, dtype=np.float32)
    tiles = np.concatenate([maps, blank], axis=1).reshape(-1, grid_rows, cols, h, w)
    return tiles.transpose(0, 1, 3, 2, 4).reshape(-1, grid_rows * h, cols * w)


def _as_shown(points: np.ndarray, image_shape: tuple[int, ...], *, features: str, unit: bool) -> np.ndarray:
    """Released rows as images for display: pixels reshaped (clipped or min-max scaled), features as tiled maps."""
    if features == "pixels":
        return _display(points.reshape((-1, *image_shape)), unit)
    return _display(feature_maps(points, scattering_shape(image_shape)), unit=False)


def mixing_preview(
    dataset: Dataset, config: SynthesisConfig, *, per_class: int = 2, originals: int = 4
) -> MixingPreview:
    """A few points per class, noise-free and released, from the same draw of records.

    Mixture indices and noise come from separate random streams, so running the
    mechanism with sigma = 0 and with the configured sigma (same seed) gives the
    same mixtures with and without noise. Points are grouped by the class of
    their noise-free label (class-centric: exactly their class; uniform mixing:
    the largest share). epsilon is reported for the full release of T points.
    """
    if config.mechanism not in PREVIEW_MECHANISMS:
        raise ValueError(f"Preview shows mixing mechanisms only: {', '.join(PREVIEW_MECHANISMS)}.")
    images = dataset.x_train.ndim >= 3  # tabular uploads: rows of numbers, previewed as rows
    config = resolve_sigma(config, dataset)
    release = planned_release(config, dataset)
    ranges = config_ranges(config, dataset.x_train)  # bounds released privately with the points (or None)
    if ranges is None:
        epsilons = tuple(acc.epsilon(release, config.delta) for acc in applicable_accountants(release))
    else:  # what is published is the ranges and the points: their one epsilon together
        from dpmix_core.synthesis.private_ranges import composed_epsilon

        epsilons = (composed_epsilon(ranges, release, config.delta),)
    bounds = config.feature_range if ranges is None else ranges.feature_range

    k = dataset.num_classes
    oversample = 1 if config.mechanism == "class-centric" else 6
    small = replace(config, T=per_class * k * oversample)
    noisy = synthesize(small, dataset).data
    clean = synthesize(replace(small, sigma_x=0.0, sigma_y=0.0), dataset).data
    shape = dataset.x_train.shape[1:]
    unit = config.unit_scaled
    owner = clean.hard_labels()
    rng = np.random.default_rng(config.seed)
    names = dataset.label_names or tuple(str(c) for c in range(k))
    units = None  # a [0,1] release of a table's columns, shown in the records' units (post-processing)
    if not images and bounds is not None:
        units = record_units(bounds, dataset.feature_dim, unit_scaled=config.unit_scaled)
    in_units = (lambda x: x) if units is None else (lambda x: units.to_records(x).astype(np.float32))
    previews = []
    for c in range(k):
        rows = np.flatnonzero(owner == c)[:per_class]
        members = np.flatnonzero(dataset.y_train == c)
        pick = rng.choice(members, size=min(originals, members.size), replace=False)
        if images:
            preview = ClassPreview(
                label=names[c],
                originals=dataset.x_train[pick].astype(np.float32) / 255.0,
                clean=_as_shown(clean.x[rows], shape, features=config.features, unit=unit),
                noisy=_as_shown(noisy.x[rows], shape, features=config.features, unit=unit),
            )
        else:
            preview = ClassPreview(
                label=names[c],
                originals=np.asarray(dataset.x_train[pick], dtype=np.float32),
                clean=in_units(clean.x[rows]),
                noisy=in_units(noisy.x[rows]),
            )
        previews.append(preview)
    if units is not None and bounds is not None:
        which = "the public bounds" if ranges is None else "the private ranges (inside the public bounds)"
        display_note = (
            "Rows: the records as uploaded; mixtures and released points mapped back from [0,1] into the same units "
            f"with {which} {describe_feature_range(bounds)} (value × (high − low) + low, "
            "post-processing), so a released value outside a column's bounds is noise."
        )
    elif not images:
        display_note = "Rows: the records as uploaded; mixtures and released points in the release's feature space."
    elif config.features != "pixels":
        c, h, w = scattering_shape(shape)
        display_note = (
            f"What is mixed and released are ScatterNet features, not pixels: each mixture and released point is "
            f"shown as its {c} channel maps of {h} × {w}, tiled, min-max scaled per point. No pixel is released."
        )
    elif unit:
        display_note = "Released points are shown clipped to [0, 1]."
    else:
        display_note = "Features are z-scored/clipped, so each image is min-max scaled for display."
    display_note += " " + GROUPING[config.mechanism]
    caveats = release.caveats()
    statement = tightest_statement(release, epsilons) if epsilons else None
    if ranges is not None and statement is not None:
        from dpmix_core.synthesis.private_ranges import ranges_sentence

        statement += " " + ranges_sentence(ranges.to_json())
    return MixingPreview(tuple(previews), epsilons, config, noisy.notes, caveats, display_note, images, statement)
