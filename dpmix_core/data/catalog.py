"""MNIST, Fashion-MNIST and CIFAR-10 with their official train/test splits.

Where the files are looked for, in order:

1. the data folder: the ``data_dir`` argument, else the ``DPMIX_DATA_DIR``
   environment variable;
2. the cache: ``DPMIX_CACHE_DIR``, else ``~/.cache/dpmix``;
3. the system's dataset folders, read-only: ``DPMIX_SYSTEM_DATA_DIRS``
   (``os.pathsep``-separated; empty: none), else :data:`SYSTEM_DATA_DIRS`,
   where Debian's dataset packages install (``apt install dataset-fashion-mnist``
   puts the four IDX files in ``/usr/share/datasets/fashion-mnist/``);
4. a download from the mirror in :data:`MIRRORS` (or ``base_url`` /
   ``DPMIX_MIRROR``) into the cache, verified against the SHA-256 in the table.

In each folder the files may sit directly in it or in a subfolder named after
the dataset (``mnist/``, ``fashion-mnist/``, ``cifar10/``; torchvision's
``MNIST/raw`` and ``FashionMNIST/raw`` work too). Accepted layouts: keras
``mnist.npz`` / ``fashion-mnist.npz``, the four IDX ``.gz`` files, and the
CIFAR-10 *binary* release (``cifar-10-binary.tar.gz`` or the extracted
``cifar-10-batches-bin/``). Local files are parsed and shape-checked, not
hash-checked, so re-packed copies work. Decoded arrays are kept in
``<cache>/decoded/`` (keyed by the files' paths, sizes and times), so only the
first load of a file pays for its decompression.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import numpy as np

from dpmix_core.data.base import Dataset, DatasetError, DatasetUnavailableError
from dpmix_core.data.decoded_cache import read_through
from dpmix_core.data.download import Mirror, Progress, RemoteFile, fetch_files
from dpmix_core.data.embedded import load_embedded
from dpmix_core.data.formats import (
    CIFAR_BATCHES,
    CIFAR_BIN_DIR,
    IDX_FILES,
    Splits,
    read_cifar_folder,
    read_cifar_tar,
    read_idx_folder,
    read_keras_npz,
)

__all__ = [
    "DATASET_NAMES",
    "DATASET_TITLES",
    "MIRRORS",
    "OFFICIAL_SPLIT_SIZES",
    "SYSTEM_DATA_DIRS",
    "cache_dir",
    "load_dataset",
    "locate_dataset",
    "default_dataset",
    "system_data_dirs",
]

DATASET_NAMES = ("mnist", "fashion-mnist", "cifar10", "embedded")
CIFAR_ARCHIVE = "cifar-10-binary.tar.gz"

# Official files and their SHA-256, as published with (or for) each release;
# cross-checked against torchvision / tensorflow-datasets / keras pins.
MIRRORS: dict[str, Mirror] = {
    "mnist": Mirror(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        (
            RemoteFile(IDX_FILES[0], "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9_912_422),
            RemoteFile(IDX_FILES[1], "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28_881),
            RemoteFile(IDX_FILES[2], "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1_648_877),
            RemoteFile(IDX_FILES[3], "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4_542),
        ),
    ),
    "fashion-mnist": Mirror(
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        (
            RemoteFile(IDX_FILES[0], "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", 26_421_880),
            RemoteFile(IDX_FILES[1], "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", 29_515),
            RemoteFile(IDX_FILES[2], "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", 4_422_102),
            RemoteFile(IDX_FILES[3], "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", 5_148),
        ),
    ),
    "cifar10": Mirror(
        "https://www.cs.toronto.edu/~kriz/",
        (RemoteFile(CIFAR_ARCHIVE, "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", 170_052_171),),
    ),
}


@dataclass(frozen=True)
class _Layout:
    """A way the files can sit in a folder: all of ``files`` present, read by ``read(folder)``."""

    files: tuple[str, ...]
    read: Callable[[Path], Splits]
    label: str


@dataclass(frozen=True)
class _Spec:
    title: str
    candidates: tuple[tuple[str, _Layout], ...]  # (subfolder, layout), tried in order; "" is the folder itself
    image_shape: tuple[int, ...]
    class_names: tuple[str, ...]
    hint: str  # what the user should put in a data folder
    split_sizes: tuple[int, int]  # the official (train, test) records


def _npz(filename: str) -> _Layout:
    return _Layout((filename,), lambda folder: read_keras_npz(folder / filename), filename)


_IDX = _Layout(IDX_FILES, read_idx_folder, "IDX .gz files")
_CIFAR_TAR = _Layout((CIFAR_ARCHIVE,), lambda folder: read_cifar_tar(folder / CIFAR_ARCHIVE), CIFAR_ARCHIVE)
_CIFAR_BIN = _Layout(tuple(f"{CIFAR_BIN_DIR}/{b}" for b in CIFAR_BATCHES), read_cifar_folder, f"{CIFAR_BIN_DIR}/")

# Bare IDX files in a folder are taken to be MNIST; Fashion-MNIST's (same file
# names) must sit in a fashion-mnist/ (or torchvision FashionMNIST/raw/) subfolder.
_SPECS = {
    "mnist": _Spec(
        "MNIST",
        (("", _npz("mnist.npz")), ("mnist", _IDX), ("MNIST/raw", _IDX), ("", _IDX)),
        (28, 28),
        tuple(str(d) for d in range(10)),
        "mnist.npz or the IDX .gz files",
        (60000, 10000),
    ),
    "fashion-mnist": _Spec(
        "Fashion-MNIST",
        (("", _npz("fashion-mnist.npz")), ("fashion-mnist", _IDX), ("FashionMNIST/raw", _IDX)),
        (28, 28),
        ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
        "fashion-mnist.npz (or the IDX .gz files in a fashion-mnist/ subfolder)",
        (60000, 10000),
    ),
    "cifar10": _Spec(
        "CIFAR-10",
        (("", _CIFAR_TAR), ("", _CIFAR_BIN), ("cifar10", _CIFAR_TAR), ("cifar10", _CIFAR_BIN)),
        (32, 32, 3),
        ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
        f"{CIFAR_ARCHIVE} or the extracted {CIFAR_BIN_DIR} folder (binary version)",
        (50000, 10000),
    ),
}
# Downloads go to cache_dir() / <name>; each mirror's files must form one of the
# layouts in that subfolder (IDX files for the MNISTs, the archive for CIFAR-10).
OFFICIAL_SPLIT_SIZES: dict[str, tuple[int, int]] = {name: spec.split_sizes for name, spec in _SPECS.items()}
DATASET_TITLES: dict[str, str] = {name: spec.title for name, spec in _SPECS.items()}


def cache_dir() -> Path:
    """The download cache: ``DPMIX_CACHE_DIR``, else ``~/.cache/dpmix``."""
    return Path(os.environ.get("DPMIX_CACHE_DIR") or Path.home() / ".cache" / "dpmix").expanduser()


# Where the system's package manager puts datasets (Debian: the dataset-* packages, FHS /usr/share).
SYSTEM_DATA_DIRS: tuple[Path, ...] = (Path("/usr/share/datasets"),)


def system_data_dirs() -> list[Path]:
    """The system's dataset folders that exist: ``DPMIX_SYSTEM_DATA_DIRS`` (``os.pathsep``-separated, empty: none) if
    set, else :data:`SYSTEM_DATA_DIRS`."""
    text = os.environ.get("DPMIX_SYSTEM_DATA_DIRS")
    folders = SYSTEM_DATA_DIRS if text is None else tuple(Path(p) for p in text.split(os.pathsep) if p.strip())
    return [folder for folder in folders if folder.is_dir()]


def _data_dirs(data_dir: str | Path | None) -> list[Path]:
    """The user's data folder (argument, else ``DPMIX_DATA_DIR``), if any; it must exist."""
    chosen = data_dir if data_dir is not None else os.environ.get("DPMIX_DATA_DIR")
    if not chosen:
        return []
    folder = Path(chosen).expanduser()
    if not folder.is_dir():
        raise DatasetError(f"Data folder {folder} does not exist or is not a folder.")
    return [folder]


class _Found(NamedTuple):
    folder: Path
    layout: _Layout
    source: str


def _find(spec: _Spec, roots: list[Path], kind: str) -> _Found | None:
    """The first candidate layout present under ``roots``, described as ``kind`` ("local"/"cache")."""
    for root in roots:
        for sub, layout in spec.candidates:
            folder = root / sub
            if all((folder / name).is_file() for name in layout.files):
                if len(layout.files) == 1:
                    return _Found(folder, layout, f"{kind} file {folder / layout.files[0]}")
                return _Found(folder, layout, f"{kind} folder {folder} ({layout.label})")
    return None


def _to_dataset(name: str, spec: _Spec, splits: Splits, source: str) -> Dataset:
    for split, x in (("train", splits.x_train), ("test", splits.x_test)):
        if x.shape[1:] != spec.image_shape:
            raise DatasetError(f"{source}: {split} images have shape {x.shape[1:]}, expected {spec.image_shape}.")
    return Dataset(
        name=name,
        x_train=splits.x_train,
        y_train=splits.y_train.astype(np.int64),
        x_test=splits.x_test,
        y_test=splits.y_test.astype(np.int64),
        num_classes=len(spec.class_names),
        source=source,
        label_names=spec.class_names,
    )


def _download_failure(exc: OSError | http.client.HTTPException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return str(exc.reason)
    return str(exc)


def load_dataset(
    name: str,
    *,
    data_dir: str | Path | None = None,
    download: bool = True,
    progress: Progress | None = None,
    base_url: str | None = None,
) -> Dataset:
    """Load ``"mnist"``, ``"fashion-mnist"``, ``"cifar10"`` or ``"embedded"`` (see the module docstring).

    ``progress(done_bytes, total_bytes)`` is called while downloading. ``base_url``
    (else ``DPMIX_MIRROR``) replaces the mirror's base URL. Raises
    :class:`DatasetUnavailableError` if the files are not found and cannot be downloaded.
    """
    key = name.strip().lower()
    if key == "embedded":
        return load_embedded()
    if key not in _SPECS:
        raise DatasetError(f"Unknown dataset {name!r}; choose one of {', '.join(DATASET_NAMES)}.")
    spec = _SPECS[key]
    data_dirs = _data_dirs(data_dir)
    found = _find_offline(spec, data_dirs)
    if found is None:
        found = _download(key, spec, data_dirs, download, progress, base_url)
    return _to_dataset(key, spec, _read(key, found), found.source)


def _find_offline(spec: _Spec, data_dirs: list[Path]) -> _Found | None:
    """The files in the data folder, else the cache, else a system folder (steps 1-3 of the module docstring)."""
    return (
        _find(spec, data_dirs, "local")
        or _find(spec, [cache_dir()], "cache")
        or _find(spec, system_data_dirs(), "system")
    )


def locate_dataset(name: str, *, data_dir: str | Path | None = None) -> str | None:
    """Where :func:`load_dataset` would read ``name`` from without downloading (its ``source``), or None: nothing is
    read or fetched, so a file found here can still fail to parse. Raises DatasetError for an unknown name or a
    data folder that does not exist."""
    key = name.strip().lower()
    if key == "embedded":
        return "embedded MNIST sample"
    if key not in _SPECS:
        raise DatasetError(f"Unknown dataset {name!r}; choose one of {', '.join(DATASET_NAMES)}.")
    found = _find_offline(_SPECS[key], _data_dirs(data_dir))
    return None if found is None else found.source


def _read(key: str, found: _Found) -> Splits:
    """The found files' arrays, through a decoded copy in the cache (see :mod:`.decoded_cache`)."""
    sources = [found.folder / name for name in found.layout.files]
    return read_through(cache_dir(), key, sources, lambda: found.layout.read(found.folder))


def _download(
    key: str, spec: _Spec, data_dirs: list[Path], download: bool, progress: Progress | None, base_url: str | None
) -> _Found:
    """Fetch the mirror's files into the cache, or raise a DatasetUnavailableError that says what to do."""
    searched = ", ".join(str(folder) for folder in [*data_dirs, cache_dir(), *system_data_dirs()])
    advice = f"Put {spec.hint} in a folder and pass --data-dir / set DPMIX_DATA_DIR."
    if not download:
        raise DatasetUnavailableError(f"{spec.title} not found in {searched} (download disabled). {advice}")
    url = base_url or os.environ.get("DPMIX_MIRROR") or MIRRORS[key].base_url
    try:
        fetch_files(MIRRORS[key].files, url, cache_dir() / key, progress)
    except (OSError, http.client.HTTPException) as exc:
        raise DatasetUnavailableError(
            f"{spec.title} not found in {searched} and download from {urlsplit(url).netloc or url} failed "
            f"(offline?): {_download_failure(exc)}. {advice}"
        ) from exc
    found = _find(spec, [cache_dir()], "cache")
    if found is None:
        raise DatasetError(f"The {spec.title} files in MIRRORS do not form a readable layout in {cache_dir() / key}.")
    return found._replace(source=f"{found.source}, downloaded from {url}")


def default_dataset(data_dir: str | Path | None = None) -> Dataset:
    """Full MNIST if it is in the data folder, the cache or a system folder (never downloads), else the embedded
    sample."""
    try:
        return load_dataset("mnist", data_dir=data_dir, download=False)
    except DatasetUnavailableError:
        return load_embedded()


# Published normalisation constants (mean, std over all pixels, in 0..255 pixel units) of the built-in
# datasets: the values of the PyTorch/torchvision examples (MNIST 0.1307/0.3081, Fashion-MNIST 0.2860/0.3530,
# CIFAR-10 0.4734/0.2516 on [0,1]), times 255. They are fixed numbers that do not depend on the copy of the data
# being released, so z-scoring with them is a public, data-independent map the accountants cover.
PUBLIC_ZSCORE_CONSTANTS: dict[str, tuple[float, float]] = {
    "mnist": (0.1307 * 255, 0.3081 * 255),
    "embedded": (0.1307 * 255, 0.3081 * 255),  # a sample of MNIST's training digits
    "fashion-mnist": (0.2860 * 255, 0.3530 * 255),
    "cifar10": (0.4734 * 255, 0.2516 * 255),
}


def public_zscore_constants(name: str) -> tuple[float, float] | None:
    """The documented public (mean, std) for a built-in dataset's pixels, or None (uploads: the user states them)."""
    return PUBLIC_ZSCORE_CONSTANTS.get(name.strip().lower())
