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
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["scattering_features", "scattering_shape", "feature_cache_path", "CACHE_VERSION"]

CACHE_VERSION = "1"  # bump when the feature definition changes


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
    """(channels, h, w) of the features of one image of shape (H, W) or (H, W, C)."""
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
    out_shape = (images.shape[0], *scattering_shape(images.shape[1:], J=J, L=L))
    path = feature_cache_path(images, J=J, L=L) if cache else None
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
