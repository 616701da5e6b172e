"""A release someone else made: read a ``synthesize`` file and its privacy card, and train on it.

A data holder runs ``synthesize`` and hands out ``FILE.npz`` (x, y and the card inside) or ``FILE.csv``
plus ``FILE.card.json``. Whoever receives it has the release, its card and the dataset's *public* test
split — never the private records. ``train --release FILE`` answers their question, "how useful is
this release?", with any model, on the real test split:

* :func:`read_release` reads and checks the file against its card (shapes, finite values, the card's
  own fields); a file that does not match gets one line saying what differs;
* :func:`release_run_options` turns the card into the run's fields: the dataset the card names (for its
  test split), the release's mechanism parameters with the noise scales it was made with (so
  ``corrected-lsq`` knows σx, σy), and the file's SHA-256, which is the run's identity (a run on the same
  bytes is the same run, wherever the file lies);
* a release of one's own file has no public test split, unless it held records out: ``synthesize --data-file
  FILE --test-fraction F`` releases the rest and says in its card which records (:func:`with_held_out`); the data
  holder, who has the file, scores models on exactly those (:func:`held_out_data`, ``train --release R
  --data-file FILE``);
* :func:`verify_card` (``verify FILE``) recomputes the card's epsilons from its own parameters and sizes with
  this version's accountants, so a recipient need not take the numbers on trust;
* :func:`save_release_upload` keeps a file uploaded on the Train & trade-offs page under its hash beside the
  results store, where background runs read it.

Privacy: training on a release is post-processing (Dwork & Roth 2014, Prop. 2.1), so the run's ε is the
card's, computed by the accountants when the release was made; nothing here spends or recomputes it.
Releases whose test records cannot be mapped without private information are refused: class-centric
``zscore-private`` (the card does not publish the private statistics).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import warnings
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dpmix_core.data import DATASET_NAMES, SPLIT_SEED, Categories, Dataset, check_categories, json_categories
from dpmix_core.data.formats import read_npz
from dpmix_core.experiments.config import synthesis_from_dict
from dpmix_core.experiments.run_data import OwnData, open_data_file, save_data_upload
from dpmix_core.privacy.checks import check_positive_int, check_sigma
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.resources.files import check_sha256, write_files_atomically
from dpmix_core.resources.limits import LimitExceeded, Limits, limits_from_env
from dpmix_core.synthesis.pipeline import SynthesisConfig

__all__ = [
    "RELEASE_SUFFIXES",
    "CardCheck",
    "ReleaseFile",
    "card_epsilon",
    "card_from_upload",
    "card_synthesis",
    "check_release_memory",
    "file_sha256",
    "held_out_data",
    "held_out_records",
    "held_out_section",
    "held_out_upload",
    "own_held_out",
    "read_card",
    "read_release",
    "ReleaseDownloads",
    "release_downloads",
    "release_run_options",
    "release_synthesis",
    "save_release_upload",
    "upload_held_out",
    "verify_card",
    "with_held_out",
]

RELEASE_SUFFIXES = (".npz", ".csv")
MEMORY_PER_FILE_BYTE = (
    4  # arrays read, float32 copies, tensors, the fit: measured peak 3.4x (ScatterNet MNIST, corrected-lsq)
)
_CARD_FIELDS = ("dataset", "parameters", "released", "epsilons")
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReleaseFile:
    """A released dataset as its recipient has it: points ``x`` (T, d), soft labels ``y`` (T, K), the card.

    ``sha256`` is the hex digest of the file's bytes (the .npz or .csv; the card beside a .csv is checked
    against the data, not hashed).
    """

    path: str
    x: np.ndarray
    y: np.ndarray
    card: dict
    sha256: str

    def __post_init__(self) -> None:
        if self.x.ndim != 2 or self.y.ndim != 2 or self.x.shape[0] != self.y.shape[0]:
            raise ValueError(
                f"release {self.path!r}: x and y must be (T, d) and (T, K) with the same T. "
                f"Found {self.x.shape} and {self.y.shape}."
            )
        check_sha256("sha256", self.sha256)

    @property
    def num_points(self) -> int:
        return int(self.x.shape[0])


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_HASH_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def check_release_memory(path: str | os.PathLike, limits: Limits | None = None) -> None:
    """Refuse (:class:`LimitExceeded`, one line) a release file too big to train on within ``DPMIX_MAX_MEMORY``.

    Checked from the file's size before it is read; a missing file passes (:func:`read_release` says so).
    """
    limits = limits or limits_from_env()
    try:
        size = Path(path).expanduser().stat().st_size
    except OSError:
        return
    need = MEMORY_PER_FILE_BYTE * size
    if need > limits.max_memory:
        raise LimitExceeded(
            f"the release file {str(path)!r} ({size / 2**30:.3g} GiB) needs about {need / 2**30:.3g} GiB of memory "
            f"to train on, over the limit of {limits.max_memory / 2**30:.3g} GiB (DPMIX_MAX_MEMORY): raise the limit "
            "on a machine that has the memory."
        )


def read_release(path: str | os.PathLike) -> ReleaseFile:
    """The release at ``path`` (``FILE.npz`` or ``FILE.csv`` with ``FILE.card.json``), checked against its card.

    Raises ValueError with one line: a missing file or card, a file that is not a release, a card that
    does not describe the data (point count, feature or label dimension), non-finite values.
    """
    path = Path(path).expanduser().absolute()  # a run in a worker elsewhere finds it too
    suffix = path.suffix.lower()
    if (path.is_dir() and (path / "card.json").is_file()) or path.name.lower() == "card.json":
        raise ValueError(
            f"{str(path)!r} is a streamed release (synthesize --memmap): its card names no dataset, so no public test "
            "split scores a model trained on it; verify and report --release read its card."
        )
    if suffix not in RELEASE_SUFFIXES:
        raise ValueError(f"a release is FILE.npz or FILE.csv (as synthesize writes it). Found {path.name!r}.")
    if not path.is_file():
        raise ValueError(f"release file {str(path)!r} does not exist.")
    sha = file_sha256(path)
    if suffix == ".npz":
        x, y, card = _read_npz(path)
    else:
        card = _read_card(path.with_suffix(".card.json"), path)
        if card["released"].get("csv_units", "release") == "data":
            x, y = _read_table_csv(path, card)
        else:
            x, y = _read_csv(path, label_dim=_released(card, "label_dim", path))
    _check_against_card(path, x, y, card)
    return ReleaseFile(str(path), x, y, card, sha)


def read_card(path: str | os.PathLike) -> dict:
    """The privacy card of a release file (``FILE.npz`` / ``FILE.csv``, checked against its data), a ``FILE.card.json``,
    or a streamed release (``synthesize --memmap``: its folder, or the ``card.json`` in it)."""
    path = Path(path).expanduser()
    if path.is_dir() and (path / "card.json").is_file():  # a streamed release's folder: x.npy, y.npy, card.json
        path = path / "card.json"
    if path.name.lower().endswith(".card.json") or path.name.lower() == "card.json":
        if not path.is_file():
            raise ValueError(f"privacy card {str(path)!r} does not exist.")
        return _parse_card(path.read_text(encoding="utf-8", errors="replace"), f"privacy card {str(path)!r}")
    return read_release(path).card


def release_synthesis(card: dict, *, where: str = "the card") -> SynthesisConfig:
    """The mechanism parameters the release was made with, noise scales as released (no target to calibrate).

    σx and σy come from the card's release description (what the mechanism used) when it has one, so a
    release calibrated to a target ε reads back with the σ it was made with.
    """
    syn = card_synthesis(card, where=where)
    if syn.mechanism == "label-laplace":
        raise ValueError(
            f"{where} describes a label-only Laplace release (real features, noisy labels); train --release "
            "reads mixing releases."
        )
    if syn.mechanism == "class-centric" and syn.preprocessing == "zscore-private":
        raise ValueError(
            f"{where}: the release was z-scored with the private data's statistics ('zscore-private'), which "
            "the card does not publish, so test records cannot be mapped into its space."
        )
    return syn


def card_synthesis(card: dict, *, where: str = "the card") -> SynthesisConfig:
    """The card's mechanism parameters as a SynthesisConfig, noise scales as released (see :func:`release_synthesis`)."""
    params = dict(card["parameters"])
    release = card.get("release") or {}
    for name in ("sigma_x", "sigma_y"):
        if release.get(name) is not None:
            params[name] = release[name]
    params["target_epsilon"] = None
    try:
        if params.get("mechanism") != "label-laplace":  # Laplace on the labels has no l, T or sigma
            for name in ("l", "T"):
                check_positive_int(name, params.get(name))
            for name in ("sigma_x", "sigma_y"):
                check_sigma(name, params.get(name))
        syn = synthesis_from_dict(params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where} does not describe a release this version can read: {exc}") from None
    return syn


def held_out_section(
    data_sha256: str, label_column: str | None, test_fraction: float, records: int, categories: Categories = ()
) -> dict[str, Any]:
    """What a card says about the records of a data file (SHA-256 ``data_sha256``) that a release held out: the
    file's hash, label column, test fraction, split seed and count, and the public categories its text columns were
    read with (when it has any). The records themselves are not in the card."""
    section: dict[str, Any] = {
        "file_sha256": check_sha256("data_sha256", data_sha256),
        "label_column": label_column,
        "test_fraction": float(test_fraction),
        "split_seed": SPLIT_SEED,
        "records": int(records),
    }
    if categories:
        section["categories"] = json_categories(categories)
    return section


def with_held_out(card: dict, held_out: dict[str, Any]) -> dict:
    """The card of a release that held records of its data file out, saying which (``dataset.held_out``:
    :func:`held_out_section`), so that whoever has the file can score models on exactly them (:func:`held_out_data`)."""
    return {**card, "dataset": {**card["dataset"], "held_out": held_out}}


def own_held_out(own: OwnData) -> dict[str, Any]:
    """:func:`held_out_section` of a data file as a run reads it (:func:`~dpmix_core.experiments.run_data.open_data_file`)."""
    options = own.options
    return held_out_section(
        options["data_sha256"],
        options["label_column"],
        options["test_fraction"],
        own.dataset.n_test,
        own.dataset.categories,
    )


def upload_held_out(
    data: bytes, label_column: str | None, test_fraction: float, records: int, categories: Categories = ()
) -> dict[str, Any]:
    """:func:`held_out_section` of an uploaded file's bytes ``data``."""
    return held_out_section(hashlib.sha256(data).hexdigest(), label_column, test_fraction, records, categories)


@dataclass(frozen=True)
class ReleaseDownloads:
    """One release as files to hand out: the ``.npz`` (card inside) and, for a [0,1] release of a table, the table in
    its own columns and units (``.csv``) with the ``.card.json`` that goes beside it (None otherwise)."""

    npz: bytes
    table_csv: bytes | None = None
    table_card: bytes | None = None


def release_downloads(
    dataset: Dataset, config: SynthesisConfig, held_out: dict[str, Any] | None = None
) -> ReleaseDownloads:
    """The release of ``dataset``'s training records made with ``config`` (one draw, one card) as :class:`ReleaseDownloads`;
    ``held_out``: the card's :func:`held_out_section` where the data's test split was held out of one's own file."""
    from dpmix_core.synthesis.export import npz_bytes, privacy_card, table_csv_bytes, with_table_layout
    from dpmix_core.synthesis.pipeline import synthesize

    synthesis = synthesize(config, dataset)
    card = privacy_card(synthesis)
    card = card if held_out is None else with_held_out(card, held_out)
    if synthesis.units is None:
        return ReleaseDownloads(npz_bytes(synthesis, card))
    table_card = json.dumps(with_table_layout(card, synthesis), indent=2).encode()
    return ReleaseDownloads(npz_bytes(synthesis, card), table_csv_bytes(synthesis), table_card)


def held_out_data(release: ReleaseFile, data_file: str | os.PathLike) -> OwnData:
    """``data_file`` split as the release's card says its records were held out (:func:`with_held_out`): the test split
    is the records the release never saw. ValueError (one line) when the card held nothing out, or the file is not
    the one the release was made from (another SHA-256, or another split)."""
    held = release.card["dataset"].get("held_out")
    where = f"the card of {release.path!r}"
    if not isinstance(held, dict):
        raise ValueError(
            f"{where} held no record of its data out: every record may be in the release, so none is left to score "
            "on. Release with synthesize --data-file FILE --test-fraction F, or train on the file (train --data-file)."
        )
    try:
        fraction, sha256, records = float(held["test_fraction"]), str(held["file_sha256"]), int(held["records"])
        label_column = held.get("label_column")
        categories = check_categories("categories", held.get("categories") or ())
        if int(held.get("split_seed", SPLIT_SEED)) != SPLIT_SEED:
            raise ValueError(f"split seed {held['split_seed']}, not this version's {SPLIT_SEED}")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{where} does not say which records it held out in a form this version reads ({exc})."
        ) from None
    own = open_data_file(data_file, label_column=label_column, test_fraction=fraction, categories=categories)
    if own.options["data_sha256"] != sha256:
        raise ValueError(
            f"{data_file} is not the file the release {release.path!r} was made from (its SHA-256 is not the card's "
            f"{sha256[:12]}...)."
        )
    if own.dataset.n_test != records:
        raise ValueError(f"{data_file} splits into other held-out records than {where} names ({records}).")
    return own


def held_out_records(card: dict) -> int | None:
    """How many records of its data file a release's card says were held out (:func:`with_held_out`); None when it
    held none out (a release of a named dataset, or of every record of a file)."""
    held = card.get("dataset", {}).get("held_out")
    try:
        return int(held["records"]) if isinstance(held, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def held_out_upload(release: ReleaseFile, data: bytes, filename: str, folder: str | os.PathLike) -> OwnData:
    """The uploaded data file a release was made from, kept under ``folder`` (:func:`~dpmix_core.experiments.run_data.
    save_data_upload`, where background runs read it) and split as the card says (:func:`held_out_data`)."""
    return held_out_data(release, save_data_upload(data, filename, folder))


def release_run_options(release: ReleaseFile, own: OwnData | None = None) -> dict[str, Any]:
    """RunConfig fields for training on ``release``: dataset, synthesis (as released), features, file and hash;
    with ``own`` (:func:`held_out_data`), the data file whose held-out records are the test split."""
    card = release.card
    dataset = card["dataset"].get("name")
    if own is None and dataset not in DATASET_NAMES:
        raise ValueError(
            f"the card of {release.path!r} names dataset {dataset!r}, which has no public test split here "
            f"(one of: {', '.join(DATASET_NAMES)}). If you made it with synthesize --data-file FILE --test-fraction F, "
            "give --data-file FILE: its held-out records are the test split. Otherwise every record may be in the "
            "release: train on the data file itself (train --data-file, or Train & trade-offs → Your own file)."
        )
    syn = release_synthesis(card, where=f"the card of {release.path!r}")
    return {
        "dataset": dataset,
        **({} if own is None else own.options),
        "synthesis": syn,
        "features": syn.features,
        "release_file": release.path,
        "release_sha256": release.sha256,
    }


def save_release_upload(files: Mapping[str, bytes], folder: str | os.PathLike) -> ReleaseFile:
    """Uploaded release files (name -> bytes: one ``.npz``, or a ``.csv`` with its ``.card.json``), kept in ``folder``.

    Saved under their SHA-256 (``<sha>.npz``; ``<sha>.csv`` + ``<sha>.card.json``) so background runs can read
    them and the same upload is stored once; written all-or-nothing, then read back with :func:`read_release`.
    A file that is not a valid release is removed again when this call created it, never otherwise.
    Raises ValueError (one line) for a wrong set of files or an invalid release.
    """
    by_kind: dict[str, tuple[str, bytes]] = {}
    for name, data in files.items():
        lower = name.lower()
        kind = ".card.json" if lower.endswith(".card.json") else Path(lower).suffix
        if kind not in (*RELEASE_SUFFIXES, ".card.json") or kind in by_kind:
            raise ValueError(
                "Upload one FILE.npz, or one FILE.csv together with its FILE.card.json (as synthesize writes them). "
                f"Found {', '.join(sorted(files)) or 'nothing'}."
            )
        by_kind[kind] = (name, data)
    data_kind = next((k for k in RELEASE_SUFFIXES if k in by_kind), None)
    if data_kind is None or (data_kind == ".csv" and ".card.json" not in by_kind) or len(by_kind) > 2:
        raise ValueError(
            "Upload one FILE.npz, or one FILE.csv together with its FILE.card.json (as synthesize writes them). "
            f"Found {', '.join(sorted(files)) or 'nothing'}."
        )
    payload = by_kind[data_kind][1]
    sha = hashlib.sha256(payload).hexdigest()
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot keep the upload in {str(folder)!r} ({exc.strerror or exc}).") from None
    target = folder / f"{sha}{data_kind}"
    wanted = {target: payload}
    if ".card.json" in by_kind:  # a .csv's card (an .npz from synthesize carries its own)
        wanted[target.with_suffix(".card.json")] = by_kind[".card.json"][1]
    new = {path: data for path, data in wanted.items() if not (path.is_file() and path.read_bytes() == data)}
    for path in new:
        if path.exists():  # same name, other bytes: a card replaced by the user; keep theirs, refuse
            raise ValueError(f"{str(path)!r} exists with other contents; remove it or upload the matching card.")
    if new:
        try:
            write_files_atomically(new)
        except OSError as exc:
            raise ValueError(f"cannot keep the upload in {str(folder)!r} ({exc.strerror or exc}).") from None
    try:
        return read_release(target)
    except ValueError:
        for path in new:
            path.unlink(missing_ok=True)  # this call wrote it: not a release, not kept
        raise


@dataclass(frozen=True)
class CardCheck:
    """A card's epsilons recomputed from its own release description (:func:`verify_card`).

    ``rows``: one per accountant, ``{"accountant", "card", "recomputed", "upper_bound", "matches"}`` (epsilons
    as numbers, inf for none); ``matches``: the description and every epsilon agree; ``reason``: one sentence;
    ``release``: the mixing release rebuilt from the card's parameters, when it is the card's description.
    """

    matches: bool
    rows: tuple[dict, ...]
    reason: str
    release: MixingRelease | None = None


def verify_card(card: dict, *, rtol: float = 1e-6) -> CardCheck:
    """Recompute a privacy card's epsilons from its parameters and sizes, with this version's accountants.

    The card's parameters, its release's n (or class sizes) and the released dimensions give the release
    description back (:func:`~dpmix_core.synthesis.pipeline.release_description`); it must equal the card's
    ``release`` entry, and each accountant's epsilon at the card's delta must match within ``rtol``. A mismatch
    means the card was edited, or was made by a version whose accountants differ from these.
    """
    from dpmix_core.data.scattering import FEATURE_TRANSFORMS
    from dpmix_core.synthesis.export import card_epsilons
    from dpmix_core.synthesis.pipeline import release_description

    syn = card_synthesis(card)
    stated = card.get("release")
    if syn.mechanism == "label-laplace":  # Laplace on the labels: epsilon is the stated parameter, exactly
        stated_eps = [card_epsilon(e.get("epsilon")) for e in card["epsilons"]]
        same = len(stated_eps) == 1 and stated_eps[0] is not None and _close(stated_eps[0], syn.label_epsilon, rtol)
        row = {"accountant": "laplace", "card": stated_eps[0] if stated_eps else None, "recomputed": syn.label_epsilon}
        reason = (
            "label-only Laplace: the card's epsilon is its label epsilon."
            if same
            else ("label-only Laplace: the card's epsilon is not its label epsilon.")
        )
        return CardCheck(same, ({**row, "upper_bound": True, "matches": same},), reason)
    if not isinstance(stated, dict):
        return CardCheck(False, (), "the card has no release description to recompute its epsilons from.")
    # the parameters hold the noise the mechanism used (calibrated or given), as the description does
    noise = [
        k
        for k in ("sigma_x", "sigma_y")
        if None not in (card["parameters"].get(k), stated.get(k)) and card["parameters"][k] != stated[k]
    ]
    if noise:
        return CardCheck(False, (), f"the card's parameters and its release description differ ({', '.join(noise)}).")
    released = card["released"]
    try:
        release = release_description(
            syn,
            syn.sigma_x or 0.0,
            syn.sigma_y or 0.0,
            n=int(stated["n"]),
            dx=int(released["feature_dim"]),
            dy=int(released["label_dim"]),
            class_sizes=tuple(int(c) for c in stated.get("class_sizes") or ()),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return CardCheck(False, (), f"the card's release description cannot be rebuilt ({exc}).")
    release = replace(release, feature_transform=FEATURE_TRANSFORMS[syn.features])
    rebuilt = json.loads(json.dumps(release.to_json()))
    differ = sorted(k for k in set(rebuilt) | set(stated) if rebuilt.get(k) != stated.get(k))
    if differ:
        return CardCheck(
            False, (), f"the card's release description does not follow from its parameters ({', '.join(differ)})."
        )
    delta = float(card["delta"])
    alone = card_epsilons(release, delta)
    rows: list[dict] = []
    ranges = card.get("feature_ranges")
    if syn.range_epsilon is not None or ranges is not None:
        checked = _ranges_rows(card, syn, release, alone, delta, rtol)
        if isinstance(checked, str):
            return CardCheck(False, (), checked, release)
        rows, expected = checked
    else:
        expected = alone
    recomputed = {e["accountant"]: e for e in expected}
    for entry in card["epsilons"]:
        name = entry.get("accountant")
        mine = recomputed.pop(name, None)
        theirs = card_epsilon(entry.get("epsilon"))
        ours = None if mine is None else card_epsilon(mine["epsilon"])
        same = ours is not None and theirs is not None and _close(theirs, ours, rtol)
        rows.append(
            {
                "accountant": name,
                "card": theirs,
                "recomputed": ours,
                "upper_bound": bool(entry.get("upper_bound")),
                "matches": same and mine is not None and bool(mine["upper_bound"]) == bool(entry.get("upper_bound")),
            }
        )
    for name, mine in recomputed.items():  # an accountant that applies but the card does not list
        eps = card_epsilon(mine["epsilon"])
        rows.append(
            {"accountant": name, "card": None, "recomputed": eps, "upper_bound": mine["upper_bound"], "matches": False}
        )
    bad = [r["accountant"] for r in rows if not r["matches"]]
    if bad:
        reason = f"recomputed epsilons differ from the card for {', '.join(bad)}."
        return CardCheck(False, tuple(rows), reason, release)
    reason = f"all {len(rows)} epsilons on the card recomputed from its description."
    return CardCheck(True, tuple(rows), reason, release)


def _ranges_rows(
    card: dict, syn: SynthesisConfig, release: MixingRelease, alone: list[dict], delta: float, rtol: float
) -> tuple[list[dict], list[dict]] | str:
    """A card with private feature ranges: (rows of the points' epsilons alone, the composed entry the card's
    ``epsilons`` must hold), or why its ranges section does not follow from its parameters."""
    from dpmix_core.synthesis.private_ranges import (
        PrivateRanges,
        composed_epsilon,
        range_noise_multiplier,
    )

    section = card.get("feature_ranges")
    if syn.range_epsilon is None or not isinstance(section, dict):
        return "the card's parameters and its feature_ranges section disagree (one without the other)."
    try:
        ranges = PrivateRanges(
            epsilon=float(section["epsilon"]),
            noise_multiplier=float(section["noise_multiplier"]),
            rounds=int(section["rounds"]),
            bins=int(section["bins"]),
            relation=str(section["relation"]),
            public=syn.feature_range or (0.0, 1.0),
            low=tuple(float(v) for v in section["low"]),
            high=tuple(float(v) for v in section["high"]),
            exact=tuple(section.get("exact_features") or ()),  # a card written before one-hots were left out: none
        )
    except (KeyError, TypeError, ValueError) as exc:
        return f"the card's feature_ranges section cannot be read ({exc})."
    z = range_noise_multiplier(syn.range_epsilon, delta, syn.ranges_relation)
    if (
        ranges.epsilon != syn.range_epsilon
        or ranges.relation != syn.ranges_relation
        or not _close(ranges.noise_multiplier, z, rtol)
        or ranges.exact != syn.exact_features
    ):
        return (
            "the card's feature ranges do not follow from its parameters (epsilon, adjacency, noise or the features "
            "left at their exact bounds)."
        )
    stated = {e.get("accountant"): card_epsilon(e.get("epsilon")) for e in section.get("release_alone") or ()}
    rows = []
    for entry in alone:
        mine, theirs = card_epsilon(entry["epsilon"]), stated.pop(entry["accountant"], None)
        same = mine is not None and theirs is not None and _close(theirs, mine, rtol)
        rows.append(
            {
                "accountant": f"{entry['accountant']} (points alone)",
                "card": theirs,
                "recomputed": mine,
                "upper_bound": bool(entry["upper_bound"]),
                "matches": same,
            }
        )
    rows += [
        {
            "accountant": f"{name} (points alone)",
            "card": eps,
            "recomputed": None,
            "upper_bound": False,
            "matches": False,
        }
        for name, eps in stated.items()
    ]
    return rows, [composed_epsilon(ranges, release, delta).to_json()]


def card_epsilon(value: Any) -> float | None:
    """An epsilon as a card stores it (a number, or "inf") as a float; None for anything else (an edited card)."""
    if value in ("inf", "+inf"):
        return math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return float(value)
    return None


def _close(a: float, b: float, rtol: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rtol * max(1.0, abs(a), abs(b))


# ---------------------------------------------------------------------------------------------------- readers


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        raise ValueError(
            f"{str(path)!r} cannot be read as an .npz archive (is it a release from synthesize?)."
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{str(path)!r} holds a single array, not a release (x, y and its privacy card).")
    with archive:
        names = set(archive.files)
        if not {"x", "y"} <= names:
            raise ValueError(
                f"{str(path)!r} is not a release written by synthesize: it needs arrays x and y "
                f"(found {', '.join(sorted(names)) or 'none'})."
            )
        try:
            x, y = archive["x"], archive["y"]
            card_text = str(archive["privacy_card"]) if "privacy_card" in names else None
        except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
            raise ValueError(f"{str(path)!r}: an array cannot be read ({exc}).") from None
    if card_text is None:
        card = _read_card(path.with_suffix(".card.json"), path)
    else:
        card = _parse_card(card_text, f"the privacy card inside {str(path)!r}")
    return _as_float32(x, path, "x"), _as_float32(y, path, "y"), card


def _read_csv(path: Path, *, label_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns y0..y{K-1} then x0..x{d-1}, one row per point (synthesize's CSV layout)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline().strip().split(",")
        body = fh.read()
    expected = [f"y{j}" for j in range(label_dim)]
    if header[:label_dim] != expected or not header[label_dim:] or header[label_dim] != "x0":
        raise ValueError(
            f"{str(path)!r} does not have synthesize's CSV header (y0..y{label_dim - 1}, then x0, x1, ...)."
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": refused below (no rows)
            table = np.loadtxt(io.StringIO(body), delimiter=",", dtype=np.float32, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: a row is not {len(header)} numbers ({exc}).") from None
    if table.shape[1] != len(header):
        raise ValueError(f"{str(path)!r}: rows have {table.shape[1]} values, the header names {len(header)}.")
    return np.ascontiguousarray(table[:, label_dim:]), np.ascontiguousarray(table[:, :label_dim])


def _read_table_csv(path: Path, card: dict) -> tuple[np.ndarray, np.ndarray]:
    """A CSV in the table's units (:mod:`dpmix_core.synthesis.units`), back in the release's [0,1] space: the header
    the card implies, the word columns skipped (the label's and the text columns': each is the argmax of numbers
    beside it), features mapped with the card's public bounds."""
    from dpmix_core.synthesis.units import record_units, table_layout

    where = f"the card of {str(path)!r}"
    d, k = _released(card, "feature_dim", path), _released(card, "label_dim", path)
    released = card["released"]
    names, classes, label = (released.get(key) for key in ("feature_names", "label_classes", "label_column"))
    if not (_strings(names) and _strings(classes) and isinstance(label, str) and label):
        raise ValueError(f"{where} says its CSV is in the table's units but does not name the table's columns.")
    try:
        categories = check_categories("categories", card["dataset"].get("categories") or ())
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    config = card_synthesis(card, where=where)
    units = record_units(config.feature_range, d, unit_scaled=config.unit_scaled)
    if units is None:
        raise ValueError(
            f"{where} says its CSV is in the table's units, but a {config.mechanism} ({config.preprocessing}) release "
            "has no map back from them."
        )
    layout = table_layout(d, names or (), label, classes or (), k, categories)
    expected = list(layout.header)
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        header = next(csv.reader([fh.readline().rstrip("\r\n")]), [])
        body = fh.read()
    if header != expected:
        at = next(
            (j for j, (a, b) in enumerate(zip(header, expected, strict=False)) if a != b),
            min(len(header), len(expected)),
        )
        found = repr(header[at]) if at < len(header) else "nothing"
        want = repr(expected[at]) if at < len(expected) else "nothing"
        raise ValueError(
            f"{str(path)!r}: column {at + 1} of the header is {found}; its card says {want} ({len(expected)} columns: "
            "the label, the features, the label scores)."
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": refused by the card's check
            table = np.loadtxt(
                io.StringIO(body),
                delimiter=",",
                quotechar='"',
                usecols=(*layout.features, *layout.scores),
                ndmin=2,
                dtype=np.float64,
            )
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: a row is not {len(expected)} values as its header says ({exc}).") from None
    return units.to_release(table[:, :d]), np.ascontiguousarray(table[:, d:], dtype=np.float32)


def _strings(value: object) -> bool:
    """None, or a list of strings (a card's optional list of names)."""
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


MAX_CARD_BYTES = 10_000_000  # a privacy card is a few KB; an upload's is read no further than this


def card_from_upload(data: bytes, filename: str) -> dict:
    """The privacy card of an uploaded ``FILE.card.json``, or the one inside a release ``FILE.npz`` (only that member
    is read, at most :data:`MAX_CARD_BYTES`); ValueError (one line) for anything else."""
    lower = filename.lower()
    if lower.endswith(".json"):  # FILE.card.json
        if len(data) > MAX_CARD_BYTES:
            raise ValueError(f"{filename} is larger than a privacy card can be ({MAX_CARD_BYTES:,} bytes).")
        return _parse_card(data.decode("utf-8", errors="replace"), f"privacy card {filename!r}")
    if not lower.endswith(".npz"):
        raise ValueError(
            f"{filename}: open a release's card (FILE.card.json) or a release FILE.npz, as synthesize writes them."
        )
    arrays, members = read_npz(data, filename, ("privacy_card",), max_decompressed=MAX_CARD_BYTES)
    if not arrays:
        raise ValueError(
            f"{filename} holds no privacy card (arrays: {', '.join(sorted(members)) or 'none'}): open its FILE.card.json."
        )
    return _parse_card(str(arrays["privacy_card"]), f"the privacy card inside {filename!r}")


def _read_card(card_path: Path, data_path: Path) -> dict:
    if not card_path.is_file():
        raise ValueError(
            f"no privacy card beside {str(data_path)!r} (expected {card_path.name}): without it the release's "
            "epsilon and noise are unknown."
        )
    return _parse_card(card_path.read_text(encoding="utf-8", errors="replace"), f"privacy card {str(card_path)!r}")


def _parse_card(text: str, where: str) -> dict:
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
    if not isinstance(card, dict) or any(key not in card for key in _CARD_FIELDS):
        raise ValueError(f"{where} is not a privacy card written by synthesize (it needs {', '.join(_CARD_FIELDS)}).")
    shapes_ok = (
        all(isinstance(card[key], dict) for key in ("dataset", "parameters", "released"))
        and isinstance(card["epsilons"], list)
        and all(
            isinstance(e, dict) and isinstance(e.get("accountant"), str) and "epsilon" in e for e in card["epsilons"]
        )
        and isinstance(card.get("release", {}), dict)
    )
    if not shapes_ok:
        raise ValueError(f"{where} is not a privacy card written by synthesize (a field has the wrong type).")
    return card


def _released(card: dict, key: str, path: Path) -> int:
    value = card["released"].get(key) if isinstance(card["released"], dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"the card of {str(path)!r} has no valid released.{key}.")
    return value


def _as_float32(a: np.ndarray, path: Path, name: str) -> np.ndarray:
    if not isinstance(a, np.ndarray):  # a zip member not written by numpy
        raise ValueError(f"{str(path)!r}: {name} is not a numpy array; the file is not a release from synthesize.")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{str(path)!r}: {name} must be numeric. Found dtype {a.dtype}.")
    return np.ascontiguousarray(a, dtype=np.float32)


def _check_against_card(path: Path, x: np.ndarray, y: np.ndarray, card: dict) -> None:
    shape = (_released(card, "points", path), _released(card, "feature_dim", path), _released(card, "label_dim", path))
    if x.ndim != 2 or y.ndim != 2 or (x.shape[0], x.shape[1], y.shape[1]) != shape or y.shape[0] != x.shape[0]:
        raise ValueError(
            f"{str(path)!r} does not match its card: the card says {shape[0]} points of {shape[1]} features and "
            f"{shape[2]} labels, the file holds x {tuple(x.shape)} and y {tuple(y.shape)}."
        )
    for name, a in (("x", x), ("y", y)):
        if not np.isfinite(a).all():
            raise ValueError(f"{str(path)!r}: {name} holds NaN or infinite values; a release never does.")
    delta = card.get("delta")
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1 and math.isfinite(delta)):
        raise ValueError(f"the card of {str(path)!r} has no valid delta.")
