"""ScatterNet features (Oyallon & Mallat; J=2, L=8 as in Tramer & Boneh 2021 and DPFMix Table 3), cached on disk.

A 28x28 grey image gives 81 x 7 x 7 coefficients (1 + J L + L^2 J (J-1)/2 = 81
channels at 1/4 resolution); a colour image 3 x 81 channels. The transform is
fixed (Morlet wavelets, no learned or data-dependent parameter), so features of
one record depend on that record only: mixing the features of a private
dataset is a release of the dataset like any other.

Backend: ``kymatio`` 0.3's 2-D torch frontend, imported directly
(``kymatio.torch`` also imports the 3-D frontend, which needs
``scipy.special.sph_harm``, removed in SciPy 1.15). Features are cached under
``cache_dir()/scattering`` as ``<sha256>.npy``, keyed by a hash of the input
array and the transform's parameters, written atomically.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dpmix_core.resources.memo import memoized

__all__ = [
    "scattering_features",
    "scattering_shape",
    "feature_cache_path",
    "group_normalise",
    "feature_transform",
    "feature_dataset",
    "FEATURE_TRANSFORMS",
    "FEATURES",
    "GN_GROUPS",
    "CACHE_VERSION",
]

CACHE_VERSION = "1"  # bump when the feature definition changes
GN_GROUPS = 27  # DPFMix App. E.2 / Tramer & Boneh 2021: GroupNorm with 27 groups of ScatterNet channels

# What a release mixed, in words (MixingRelease.feature_transform): public, data-independent maps of one record.
FEATURE_TRANSFORMS = {
    "pixels": "pixels",
    "scattering": (
        "ScatterNet features (kymatio 0.3 Scattering2D, J=2, L=8, Morlet wavelets) of pixels/255, then per-sample "
        f"GroupNorm ({GN_GROUPS} groups, eps 1e-5, no learned parameters): a public, data-independent extractor "
        "(DPFMix App. E.2); each record's features depend on that record only"
    ),
}

FEATURES = tuple(FEATURE_TRANSFORMS)  # what a release (or a run) can mix: "pixels", "scattering"


def _backend():
    try:
        from kymatio.scattering2d.frontend.torch_frontend import ScatteringTorch2D
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "ScatterNet features need kymatio 0.3 (pip install kymatio==0.3.0); "
            f"importing its 2-D torch frontend failed: {exc}"
        ) from exc
    return ScatteringTorch2D


def scattering_shape(image_shape: tuple[int, ...], *, J: int = 2, L: int = 8) -> tuple[int, int, int]:
    """(channels, h, w) of the features of one image of shape (H, W) or (H, W, C). ValueError: a record of
    another shape (a table's row of features has no ScatterNet features)."""
    if len(image_shape) not in (2, 3):
        what = f"{image_shape[0]} features (a table)" if len(image_shape) == 1 else f"shape {tuple(image_shape)}"
        raise ValueError(
            f"ScatterNet features are computed from images (H, W) or (H, W, C); a record here has {what}: mix the "
            "records' own features instead (features 'pixels', the default)"
        )
    h, w = int(image_shape[0]), int(image_shape[1])
    c = 1 if len(image_shape) == 2 else int(image_shape[2])
    per_channel = 1 + J * L + L * L * J * (J - 1) // 2
    return c * per_channel, h // 2**J, w // 2**J


def feature_cache_path(images: np.ndarray, *, J: int = 2, L: int = 8) -> Path:
    """Where the features of exactly this array are cached (the file may not exist yet)."""
    from dpmix_core.data import cache_dir

    h = hashlib.sha256()
    h.update(f"scattering-v{CACHE_VERSION}|J={J}|L={L}|{images.dtype.str}|{images.shape}|".encode())
    h.update(np.ascontiguousarray(images).data)
    return cache_dir() / "scattering" / f"{h.hexdigest()}.npy"


def _atomic_save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, array)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def scattering_features(
    images: np.ndarray,
    *,
    J: int = 2,
    L: int = 8,
    device: str = "cpu",
    cache: bool = True,
    batch_size: int = 512,
    check: Callable[[], None] | None = None,
) -> np.ndarray:
    """ScatterNet coefficients of uint8 images (n, H, W) or (n, H, W, C) as pixels/255: float32 (n, C*81, H/4, W/4).

    ``check`` is called between batches (the runner's cancellation check).
    With ``cache`` the result is read from / written to the feature cache.
    """
    images = np.asarray(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"images must have shape (n, H, W) or (n, H, W, C). Found {images.shape}.")
    if not cache:
        return _compute_scattering(images, J=J, L=L, device=device, batch_size=batch_size, check=check, path=None)
    path = feature_cache_path(images, J=J, L=L)
    # a long-lived sweep worker keeps the features in memory for its next run (resources.memo)
    return memoized(
        ("scattering", path.name),
        lambda: _compute_scattering(images, J=J, L=L, device=device, batch_size=batch_size, check=check, path=path),
    )


def _compute_scattering(
    images: np.ndarray,
    *,
    J: int,
    L: int,
    device: str,
    batch_size: int,
    check: Callable[[], None] | None,
    path: Path | None,
) -> np.ndarray:
    """The features from the disk cache at ``path`` if it holds them, else computed (and saved there)."""
    out_shape = (images.shape[0], *scattering_shape(images.shape[1:], J=J, L=L))
    if path is not None and path.exists():
        try:
            feats = np.load(path)
            if feats.shape == out_shape and feats.dtype == np.float32:
                return feats
        except (OSError, ValueError):
            pass  # unreadable cache entry: recompute and overwrite
    import torch

    from dpmix_core.mechanisms import resolve_device

    dev = resolve_device(device)
    transform = _backend()(J=J, shape=images.shape[1:3], L=L).to(dev)
    feats = np.empty(out_shape, dtype=np.float32)
    scale = 1 / 255.0 if images.dtype == np.uint8 else 1.0
    with torch.no_grad():
        for start in range(0, images.shape[0], batch_size):
            if check is not None:
                check()
            chunk = torch.from_numpy(images[start : start + batch_size].astype(np.float32)).to(dev) * scale
            if chunk.ndim == 4:  # (B, H, W, C) -> (B, C, H, W)
                chunk = chunk.permute(0, 3, 1, 2)
            coeffs = transform(chunk.contiguous())  # (B, 81, h, w) or (B, C, 81, h, w)
            feats[start : start + len(chunk)] = coeffs.reshape(len(chunk), *out_shape[1:]).cpu().numpy()
    if path is not None:
        _atomic_save(path, feats)
    return feats


def group_normalise(feats: np.ndarray, *, groups: int = GN_GROUPS, batch_size: int = 4096) -> np.ndarray:
    """Per-sample GroupNorm without parameters (DPFMix App. E.2): float32 (n, C, h, w) -> same shape.

    Each sample's channels are split into ``groups`` groups, each set to mean 0
    and variance 1 over its own entries (torch's ``group_norm``, eps 1e-5):
    a function of that sample only, so it may precede clipping and mixing.
    """
    import torch
    import torch.nn.functional as F

    feats = np.asarray(feats, dtype=np.float32)
    if feats.ndim != 4 or feats.shape[1] % groups:
        raise ValueError(f"features must have shape (n, C, h, w) with C a multiple of {groups}. Found {feats.shape}.")
    out = np.empty_like(feats)
    with torch.no_grad():
        for start in range(0, feats.shape[0], batch_size):
            chunk = torch.from_numpy(np.array(feats[start : start + batch_size]))  # a copy: feats may be read-only
            out[start : start + len(chunk)] = F.group_norm(chunk, groups, eps=1e-5).numpy()
    return out


def feature_transform(
    name: str, images: np.ndarray, *, device: str = "cpu", check: Callable[[], None] | None = None
) -> np.ndarray:
    """The public feature map ``name`` (see FEATURE_TRANSFORMS) of raw records: float32 (n, d), flat.

    "pixels": pixels/255 for uint8 images, float features unchanged.
    "scattering": ScatterNet (J=2, L=8) of pixels/255, then per-sample GroupNorm (27 groups).
    """
    if name not in FEATURE_TRANSFORMS:
        raise ValueError(f"Unknown feature transform {name!r}. Choose one of: {', '.join(FEATURE_TRANSFORMS)}.")
    images = np.asarray(images)
    if name == "pixels":
        flat = images.reshape(images.shape[0], -1)
        return flat.astype(np.float32) / np.float32(255) if images.dtype == np.uint8 else flat.astype(np.float32)
    if images.shape[0] == 0:  # no records (e.g. a release file's run needs no private training split)
        return np.zeros((0, math.prod(scattering_shape(images.shape[1:]))), np.float32)
    key = ("feature_transform", name, feature_cache_path(images).name)

    def compute() -> np.ndarray:
        feats = group_normalise(scattering_features(images, device=device, check=check))
        return feats.reshape(feats.shape[0], -1)

    return memoized(key, compute)  # kept across the runs of a long-lived sweep worker (resources.memo)


def feature_dataset(dataset, name: str, *, device: str = "cpu", check: Callable[[], None] | None = None):
    """``dataset`` with both splits mapped by the feature transform ``name`` (flat float32 rows); same labels."""
    from dpmix_core.data import Dataset

    if name == "pixels":
        return dataset
    x_test = None if dataset.x_test is None else feature_transform(name, dataset.x_test, device=device, check=check)
    return Dataset(
        f"{dataset.name}-{name}",
        feature_transform(name, dataset.x_train, device=device, check=check),
        dataset.y_train,
        x_test,
        dataset.y_test,
        dataset.num_classes,
        f"{dataset.source}; {name} features",
        dataset.label_names,
    )
