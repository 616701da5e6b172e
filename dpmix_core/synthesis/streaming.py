"""Releases larger than memory: random mixing streamed from a memory-mapped source, chunk by chunk.

:func:`synthesize_streaming` runs DPMix (``l`` distinct records per point, without replacement) or
Poisson mixing (DPFMix) on a source of shape (n, d) -- typically an ``np.memmap`` of uint8 pixels on
disk -- and writes the T released points incrementally into a release folder::

    OUT/x.npy       (T, d)  float32, filled chunk by chunk through np.lib.format.open_memmap
    OUT/y.npy       (T, K)  float32 soft labels
    OUT/card.json   the privacy card: the release description and every applicable accountant's epsilon

Memory is bounded by the chunk, not by n or T. Per chunk of ``c`` points:

1. draw the indices with the exact samplers of :mod:`dpmix_core.mechanisms.sampling`
   (uniform l-subsets without duplicates, or Poisson batches);
2. ``np.unique`` the ``c*l`` indices and read only those rows of the source (sorted reads, so a
   memmap touches each needed page once), plus their labels;
3. hand that small sub-table and the chunk's indices into it to the in-memory mechanisms' engine
   (:func:`dpmix_core.mechanisms.engine.mix_and_perturb`: ``embedding_bag`` sums, tiled Gaussian
   noise; CPU or CUDA, ``device="auto"`` uses CUDA when present);
4. write the chunk into the output memmaps, flush, and drop the pages of the source and output
   mappings from this process (``madvise(MADV_DONTNEED)``: they stay in the OS page cache).

The cost is O(T * l * d) (gather + sum), independent of n; see ``bench/bench_streaming.py``.

Randomness: one numpy ``SeedSequence`` from ``seed``; chunk ``j`` draws its indices from child
``(0, j)`` and its noise from the engine's streams under child ``(1, j)``, so a seed and a chunk size give the same release on
every run. The output has the same law as the in-memory :func:`~dpmix_core.mechanisms.dpmix` /
:func:`~dpmix_core.mechanisms.poisson_mix` (same sampler, same normalisation, same noise), but it is
NOT bit-identical to them: the random streams are split per chunk differently.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

import dpmix_core
from dpmix_core.mechanisms.device_sampling import sample_mixture_indices_torch, sample_poisson_batches_torch
from dpmix_core.mechanisms.engine import (
    NOISE_TILE,
    Segment,
    child_sequence,
    chunk_rows_for,
    mix_and_perturb,
    resolve_device,
    seed_sequence,
)
from dpmix_core.mechanisms.mixing import unit_features
from dpmix_core.mechanisms.sampling import sample_mixture_indices, sample_poisson_batches
from dpmix_core.privacy.checks import FeatureRange, check_feature_range, feature_range_vectors
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.privacy.statement import card_statement
from dpmix_core.resources.files import check_new_file, file_mode, make_temp_dir, remove_own_temp
from dpmix_core.resources.limits import LimitExceeded

__all__ = [
    "STREAM_MECHANISMS",
    "StreamingRelease",
    "check_stream_output",
    "default_chunk_points",
    "load_release",
    "stream_release",
    "synthesize_streaming",
]

STREAM_MECHANISMS = ("dpmix", "poisson")
RESIDENT_ELEMENTS = 1 << 26  # a source with n * (d + K) up to this (256 MB as float32) is read once and kept
ELEMENTS_PER_CHUNK = 1 << 23  # gathered indices x feature columns per chunk: ~32 MB of float32 sub-table
_EXACT_UINT8_SUM = 2**24 // 255


@dataclass(frozen=True)
class StreamingRelease:
    """What :func:`synthesize_streaming` wrote: the release (for the accountants), the files and timings."""

    release: MixingRelease
    out_dir: Path
    x_path: Path
    y_path: Path
    card_path: Path
    card: dict
    chunks: int
    chunk_points: int
    seconds: float
    device: str
    stats: dict = field(default_factory=dict)

    @property
    def points_per_s(self) -> float:
        return self.release.num_points / self.seconds if self.seconds > 0 else math.inf


def default_chunk_points(l: int, d: int, *, elements: int = ELEMENTS_PER_CHUNK) -> int:
    """Points per chunk so that (points * l) gathered rows * d columns stays about ``elements``."""
    return max(1, int(elements // (max(1, l) * max(1, d))))


def stream_release(
    *,
    mechanism: str,
    n: int,
    d: int,
    k: int,
    l: int,
    T: int,
    sigma_x: float,
    sigma_y: float | None = None,
    clip_x: float = 1.0,
    clip_y: float = 1.0,
    public_n: int | None = None,
) -> MixingRelease:
    """The release :func:`synthesize_streaming` makes with these settings (known before any row is read).

    Poisson: the rate m/n uses ``public_n`` when stated (the count of the source is private under
    add/remove adjacency); without it the source's row count is taken as the public n.
    """
    if mechanism not in STREAM_MECHANISMS:
        raise ValueError(f"streaming supports mechanism in {STREAM_MECHANISMS}. Found {mechanism!r}.")
    sigma_y = sigma_x if sigma_y is None else sigma_y
    if mechanism == "dpmix":
        return MixingRelease.dpmix(n=n, l=l, T=T, sigma_x=sigma_x, sigma_y=sigma_y, dx=d, dy=k)
    n = public_n if public_n is not None else n
    return MixingRelease.poisson(n=n, m=l, T=T, sigma_x=sigma_x, sigma_y=sigma_y, clip_x=clip_x, clip_y=clip_y)


def check_stream_output(out_dir: Path, *, T: int, d: int, k: int, overwrite: bool = False) -> Path:
    """The release folder can be written: it does not exist (unless ``overwrite``), its parent is a
    writable folder, and the disk there has room for the T*(d+K) float32 values (checked before
    anything is written; ValueError / LimitExceeded with one line)."""
    out_dir = Path(out_dir)
    if (out_dir.exists() or out_dir.is_symlink()) and not overwrite:
        raise ValueError(f"{str(out_dir)!r} exists; pass overwrite=True to replace it (or choose another --out).")
    check_new_file(out_dir.parent / f".{out_dir.name}.check", what="--out")  # the parent: a writable folder
    need = float(T) * (d + k) * 4
    free = shutil.disk_usage(out_dir.parent).free
    if need > free:
        raise LimitExceeded(
            f"the release needs {need / 2**30:.3g} GiB on disk, but {str(out_dir.parent)!r} has "
            f"{free / 2**30:.3g} GiB free: lower T or write elsewhere."
        )
    return out_dir


def load_release(
    out_dir: str | os.PathLike,
    *,
    mmap_mode: Literal["r+", "r", "w+", "c"] | None = "r",
) -> tuple[np.ndarray, np.ndarray, dict]:
    """(x, y, card) of a release folder; x and y memory-mapped read-only by default."""
    out_dir = Path(out_dir)
    x = np.load(out_dir / "x.npy", mmap_mode=mmap_mode)
    y = np.load(out_dir / "y.npy", mmap_mode=mmap_mode)
    card = json.loads((out_dir / "card.json").read_text())
    return x, y, card


def synthesize_streaming(
    source: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    mechanism: str = "dpmix",
    l: int,
    T: int,
    sigma_x: float,
    sigma_y: float | None = None,
    seed: int | np.random.SeedSequence | None = 0,
    out_path: str | os.PathLike,
    chunk_points: int | None = None,
    device: str = "cpu",
    feature_range: FeatureRange | None = None,
    clip_x: float = 1.0,
    clip_y: float = 1.0,
    delta: float = 1e-5,
    overwrite: bool = False,
    release_pages: bool = True,
    accountants: bool = True,
    epsilons_for: Callable[[MixingRelease], list[dict]] | None = None,
    resident_elements: int = RESIDENT_ELEMENTS,
    public_n: int | None = None,
    on_chunk: Callable[[int], None] | None = None,
) -> StreamingRelease:
    """Mix ``T`` points from ``source`` (n, d) / ``labels`` (n,) and write them to the folder ``out_path``.

    ``mechanism``: ``"dpmix"`` (mean of ``l`` distinct records; uint8 features are divided by 255,
    float features need the public ``feature_range``: one (low, high) pair, or one per feature) or ``"poisson"`` (each record joins a point
    w.p. l/n; features uint8/255 or min-max by ``feature_range`` or as given, rows clipped to
    ``||x|| <= clip_x``; the sum is divided by l). ``sigma_y`` defaults to ``sigma_x``.
    ``source`` and ``labels`` may be ``np.memmap`` (or any array supporting sorted fancy indexing);
    they are never copied as a whole, and labels are validated chunk by chunk.

    The folder is written into a new, uniquely named ``.OUT.partial-XXXX`` beside ``OUT`` and renamed
    to ``OUT`` at the end (an interrupted run leaves no half release under the final name); a failure
    removes only that folder, never a path this call did not create. Output path, and free disk
    space for the T*(d+K) float32 values, are checked first. ``epsilons_for(release)``: the card's
    epsilons if the caller computes them (e.g. :func:`dpmix_core.synthesis.epsilon_job.background_epsilons`,
    in a second process while this one streams). ``on_chunk(points_written)``: called after each chunk (a
    progress line; the count is of points in the folder so far, out of ``T``). Returns a :class:`StreamingRelease`.

    Resident mode: when ``n * (d + K) <= resident_elements`` the source is read once (in pieces)
    into the mixing table and only the *output* is streamed, in the engine's chunks (indices drawn
    on the device off the CPU): reading ``l`` rows per point from the file costs T * l row reads,
    which for MNIST-sized sources is 250x more than reading it once. Memory is then the table plus
    one chunk. An explicit ``chunk_points`` (or ``resident_elements=0``) selects the chunked mode,
    whose memory is bounded by the chunk alone (any n).
    """
    if mechanism not in STREAM_MECHANISMS:
        raise ValueError(f"streaming supports mechanism in {STREAM_MECHANISMS}. Found {mechanism!r}.")
    if source.ndim != 2:
        raise ValueError(f"source must be 2-D (n, d). Found shape {source.shape}.")
    n, d = (int(s) for s in source.shape)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},). Found {labels.shape}.")
    k = int(num_classes)
    if k < 1:
        raise ValueError(f"num_classes must be >= 1. Found {num_classes}.")
    sigma_y = sigma_x if sigma_y is None else sigma_y
    release = stream_release(
        mechanism=mechanism,
        n=n,
        d=d,
        k=k,
        l=l,
        T=T,
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        clip_x=clip_x,
        clip_y=clip_y,
        public_n=public_n,
    )
    if mechanism == "dpmix" and feature_range is None and source.dtype != np.uint8:
        raise ValueError(
            f"source has dtype {source.dtype}: DPMix needs [0,1] features, give the public "
            "feature_range, e.g. (0.0, 1.0); min-max from the private data is not covered."
        )
    if feature_range is not None:
        feature_range = check_feature_range("feature_range", feature_range)
        feature_range_vectors(feature_range, d)  # one pair per feature: as many as the source has
    dev = resolve_device(device)
    chunk = int(chunk_points or default_chunk_points(l, d))
    if chunk < 1:
        raise ValueError(f"chunk_points must be >= 1. Found {chunk_points}.")

    out_dir = Path(out_path)
    check_stream_output(out_dir, T=T, d=d, k=k, overwrite=overwrite)
    tmp_dir = make_temp_dir(out_dir)  # unique, created here: the only folder a failure removes

    ss = seed_sequence(seed)
    dpmix_uint8 = mechanism == "dpmix" and feature_range is None
    plan = _MixPlan(
        mechanism=mechanism,
        k=k,
        l=l,
        T=T,
        sigma_x=float(sigma_x),
        sigma_y=float(sigma_y),
        rate=l / release.n,  # the stated public n (stream_release), never the private row count
        feature_range=feature_range,
        clip_x=clip_x,
        table_dtype=np.float64 if dpmix_uint8 and l > _EXACT_UINT8_SUM else np.float32,
        denom_x=(255.0 if dpmix_uint8 else 1.0) * l,
        label_value=1.0 if mechanism == "dpmix" else min(1.0, float(clip_y)),
        device=dev,
        release_pages=release_pages,
    )
    stats = {"rows_read": 0, "max_unique_rows": 0, "max_indices": 0}
    t0 = time.perf_counter()
    resident = chunk_points is None and n * (d + k) <= resident_elements
    x_out = y_out = None
    try:
        x_out = np.lib.format.open_memmap(tmp_dir / "x.npy", mode="w+", dtype=np.float32, shape=(T, d))
        y_out = np.lib.format.open_memmap(tmp_dir / "y.npy", mode="w+", dtype=np.float32, shape=(T, k))
        if resident:
            chunk = chunk_rows_for(l)
            chunks = _mix_resident(
                source,
                labels,
                plan,
                seed_seq=child_sequence(ss, 2),
                out=(x_out, y_out),
                stats=stats,
                chunk_rows=chunk,
                on_chunk=on_chunk,
            )
        else:
            chunks = _mix_chunked(
                source,
                labels,
                plan,
                seed_seq=ss,
                out=(x_out, y_out),
                stats=stats,
                chunk_points=chunk,
                on_chunk=on_chunk,
            )
        x_out.flush()
        y_out.flush()
        seconds = time.perf_counter() - t0
        x_out = y_out = None  # close the maps before the folder is renamed
        card = streaming_card(
            release,
            mechanism=mechanism,
            delta=delta,
            seed=seed if isinstance(seed, int) else None,
            n=n,
            d=d,
            k=k,
            chunk_points=chunk,
            device=str(dev),
            feature_range=feature_range,
            mode="resident" if resident else "chunked",
            accountants=accountants,
            epsilons_for=epsilons_for,
            clip=(clip_x, clip_y),
            public_n=public_n,
        )
        _publish(tmp_dir, out_dir, card)
    except BaseException:
        x_out = y_out = None  # noqa: F841 -- close the maps before removing their files
        remove_own_temp(tmp_dir)
        raise
    return StreamingRelease(
        release=release,
        out_dir=out_dir,
        x_path=out_dir / "x.npy",
        y_path=out_dir / "y.npy",
        card_path=out_dir / "card.json",
        card=card,
        chunks=chunks,
        chunk_points=chunk,
        seconds=seconds,
        device=str(dev),
        stats=stats,
    )


def streaming_card(
    release: MixingRelease,
    *,
    mechanism: str,
    delta: float,
    seed: int | None,
    n: int,
    d: int,
    k: int,
    chunk_points: int,
    device: str,
    feature_range=None,
    accountants: bool = True,
    epsilons_for: Callable[[MixingRelease], list[dict]] | None = None,
    mode: str = "chunked",
    clip: tuple[float, float] = (1.0, 1.0),
    public_n: int | None = None,
) -> dict:
    """The privacy card of a streamed release (same fields as :func:`dpmix_core.synthesis.export.privacy_card` where
    they apply): every accountant whose assumptions match the release, with its epsilon at ``delta``.

    ``parameters`` are the release's recipe as a :class:`~dpmix_core.synthesis.pipeline.SynthesisConfig` and
    ``release`` its description, as on an in-memory release's card, so that ``verify`` and ``report --release``
    recompute its epsilons (``clip``: Poisson's (Cx, Cy); ``public_n``: its stated n)."""
    import dataclasses

    from dpmix_core.synthesis.export import GENERAL_CAVEATS, clean_json
    from dpmix_core.synthesis.pipeline import SynthesisConfig

    recipe = SynthesisConfig(
        mechanism=mechanism,
        l=release.mix_degree,
        T=release.num_points,
        sigma_x=release.sigma_x,
        sigma_y=release.sigma_y,
        clip_x=clip[0],
        clip_y=clip[1],
        public_n=public_n if mechanism == "poisson" else None,
        feature_range=feature_range,
        seed=seed if seed is not None else 0,
        device=device,
    )

    card: dict = {
        "dpmix_studio_version": dpmix_core.__version__,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "mechanism": mechanism,
        "streamed": {
            "chunk_points": chunk_points,
            "device": device,
            "mode": mode,
            "files": ["x.npy", "y.npy"],
            "note": "same law as the in-memory mechanism, not bit-identical to it (random streams per chunk)",
        },
        "parameters": {  # a SeedSequence (a library caller's) is not recorded
            k: v for k, v in dataclasses.asdict(recipe).items() if k != "seed" or seed is not None
        },
        "seed": seed,
        "dataset": {"n": n},
        "released": {"points": release.num_points, "feature_dim": d, "label_dim": k},
        "release": release.to_json(),  # the one description the mechanism ran (verify rebuilds it from the recipe)
        "release_description": release.describe(),
        "delta": delta,
        "epsilons": [],
        "caveats": list(GENERAL_CAVEATS),
    }
    computed = None
    if accountants and epsilons_for is not None:
        try:
            computed = epsilons_for(release)
        except Exception:  # noqa: BLE001 - fall back to one accountant at a time, errors recorded
            computed = None
    if computed is not None:
        card["epsilons"] = list(computed)
    elif accountants:
        from dpmix_core.privacy.accountants import applicable_accountants  # dp_accounting: loaded only here

        for acc in applicable_accountants(release):
            try:
                card["epsilons"].append(acc.epsilon(release, delta).to_json())
            except Exception as exc:  # noqa: BLE001 - one accountant out of range must not lose the release
                card["epsilons"].append(
                    {"accountant": getattr(acc, "name", type(acc).__name__), "error": f"{type(exc).__name__}: {exc}"}
                )
        if any(e.get("upper_bound") is False for e in card["epsilons"]):
            card["caveats"].append("gdp-clt is a central-limit approximation, not an upper bound; use pld-poisson.")
    if any("epsilon" in e for e in card["epsilons"]):
        card["statement"] = card_statement(release, card["epsilons"])  # for a release note, in words
    return clean_json(card)


# --------------------------------------------------------------------------- helpers


def _fixed_draw(inv: np.ndarray, offsets: np.ndarray | None):
    """A segment draw that returns indices drawn already (the chunk's, remapped to its gathered rows)."""

    def draw(_rng: np.random.Generator, _rows: int) -> tuple[np.ndarray, np.ndarray | None]:
        return inv, offsets

    return draw


@dataclass(frozen=True)
class _MixPlan:
    """What every chunk of one streaming release shares: mechanism, sizes, normalisation, noise and device."""

    mechanism: str
    k: int
    l: int
    T: int
    sigma_x: float
    sigma_y: float
    rate: float  # Poisson: m / public n
    feature_range: FeatureRange | None
    clip_x: float
    table_dtype: Any
    denom_x: float  # the feature sum is divided by this (l, or 255 * l for raw uint8 DPMix pixels)
    label_value: float  # the one-hot entry (1, or min(1, clip_y) for Poisson)
    device: Any
    release_pages: bool


def _mix_resident(
    source,
    labels,
    plan: _MixPlan,
    *,
    seed_seq: np.random.SeedSequence,
    out: tuple[np.memmap, np.memmap],
    stats: dict,
    chunk_rows: int,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Resident mode: the whole source as the engine's table, the output written chunk by chunk into ``out``."""
    n = int(source.shape[0])
    every = np.arange(n)
    sub_labels = _gather(labels, every, plan.release_pages)
    _check_chunk_labels(sub_labels, plan.k)
    feats = _features(
        _gather(source, every, plan.release_pages), plan.mechanism, plan.feature_range, plan.clip_x, plan.table_dtype
    )
    stats.update(rows_read=n, max_unique_rows=n, max_indices=chunk_rows * plan.l)

    def draw(rng: np.random.Generator, rows: int):
        if plan.mechanism == "dpmix":
            return sample_mixture_indices(n=n, mix_degree=plan.l, num_points=rows, rng=rng), None
        return sample_poisson_batches(n=n, rate=plan.rate, num_points=rows, rng=rng)

    def draw_device(gen, rows: int):
        if plan.mechanism == "dpmix":
            return sample_mixture_indices_torch(n=n, mix_degree=plan.l, num_points=rows, generator=gen), None
        return sample_poisson_batches_torch(n=n, rate=plan.rate, num_points=rows, generator=gen)

    written = []

    def after_chunk(row0: int, rows: int) -> None:
        written.append(rows)
        if plan.release_pages:
            for arr in out:
                arr.flush()
                _drop_pages(arr)
        if on_chunk is not None:
            on_chunk(row0 + rows)

    _perturb(
        plan,
        feats,
        sub_labels,
        dx=int(source.shape[1]),
        segment=Segment(0, plan.T, 0, draw, draw_device=draw_device),
        num_points=plan.T,
        seed_seq=seed_seq,
        chunk_rows=chunk_rows,
        out=out,
        after_chunk=after_chunk,
    )
    return len(written)


def _mix_chunked(
    source,
    labels,
    plan: _MixPlan,
    *,
    seed_seq: np.random.SeedSequence,
    out: tuple[np.memmap, np.memmap],
    stats: dict,
    chunk_points: int,
    on_chunk: Callable[[int], None] | None = None,
) -> int:
    """Chunked mode: per chunk of points, draw its indices, read only those rows (sorted), mix them into ``out``.

    Chunk ``j`` draws its indices from child ``(0, j)`` of ``seed_seq`` and its noise under child ``(1, j)``."""
    n = int(source.shape[0])
    x_out, y_out = out
    chunks = 0
    for j, a in enumerate(range(0, plan.T, chunk_points)):
        c = min(chunk_points, plan.T - a)
        rng = np.random.Generator(np.random.PCG64(child_sequence(seed_seq, 0, j)))
        if plan.mechanism == "dpmix":
            idx = sample_mixture_indices(n=n, mix_degree=plan.l, num_points=c, rng=rng).reshape(-1)
            offsets = None
        else:
            idx, offsets = sample_poisson_batches(n=n, rate=plan.rate, num_points=c, rng=rng)
        uniq, inv = np.unique(idx, return_inverse=True)
        del idx
        sub = _gather(source, uniq, plan.release_pages)  # sorted row reads: each needed page once
        sub_labels = _gather(labels, uniq, plan.release_pages)
        _check_chunk_labels(sub_labels, plan.k)
        feats = _features(sub, plan.mechanism, plan.feature_range, plan.clip_x, plan.table_dtype)
        del sub
        stats["rows_read"] += int(uniq.size)
        stats["max_unique_rows"] = max(stats["max_unique_rows"], int(uniq.size))
        stats["max_indices"] = max(stats["max_indices"], int(inv.size))
        inv = inv.reshape(c, plan.l) if offsets is None else inv
        xs, ys = _perturb(
            plan,
            feats,
            sub_labels,
            dx=int(source.shape[1]),
            segment=Segment(0, c, 0, _fixed_draw(inv, offsets)),
            num_points=c,
            seed_seq=child_sequence(seed_seq, 1, j),
            chunk_rows=-(-c // NOISE_TILE) * NOISE_TILE,
            index_sampling="host",
        )
        del feats, sub_labels, uniq, inv, offsets
        x_out[a : a + c] = xs
        y_out[a : a + c] = ys
        del xs, ys
        chunks += 1
        if plan.release_pages:
            x_out.flush()
            y_out.flush()
            for arr in (source, labels, x_out, y_out):
                _drop_pages(arr)
        if on_chunk is not None:
            on_chunk(a + c)
    return chunks


def _perturb(plan: _MixPlan, feats: np.ndarray, sub_labels: np.ndarray, *, dx: int, segment: Segment, **engine):
    """:func:`mix_and_perturb` on a gathered table with the plan's normalisation and noise (``engine``: the rest)."""
    return mix_and_perturb(
        features=feats,
        labels=sub_labels.astype(np.intp),
        label_value=plan.label_value,
        dtype=plan.table_dtype,
        dx=dx,
        dy=plan.k,
        segments=[segment],
        denom_x=plan.denom_x,
        denom_y=float(plan.l),
        sigma_x=plan.sigma_x,
        sigma_y=plan.sigma_y,
        device=plan.device,
        **engine,
    )


def _publish(tmp_dir: Path, out_dir: Path, card: dict) -> None:
    """Write the card into the finished temporary folder, set the modes and rename it to ``out_dir`` (replacing it)."""
    (tmp_dir / "card.json").write_text(json.dumps(card, indent=2))
    for name in ("x.npy", "y.npy", "card.json"):
        os.chmod(tmp_dir / name, file_mode())
    os.chmod(tmp_dir, file_mode(directory=True))
    if out_dir.is_symlink() or out_dir.is_file():
        out_dir.unlink()  # overwrite=True: the caller asked to replace it
    elif out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp_dir, out_dir)


def _check_chunk_labels(sub_labels: np.ndarray, k: int) -> None:
    if sub_labels.size and not np.issubdtype(sub_labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(sub_labels, 1), 0)):
            raise ValueError("labels must be integers 0..K-1.")
    if sub_labels.size and (sub_labels.min() < 0 or sub_labels.max() >= k):
        raise ValueError(f"labels must lie in 0..{k - 1}. Found {sub_labels.min()}..{sub_labels.max()}.")


def _features(sub: np.ndarray, mechanism: str, feature_range, clip_x: float, dtype) -> np.ndarray:
    """The gathered rows as the mechanism's table: raw uint8 values (DPMix, divided by 255*l later),
    min-max by the public range, or (Poisson) /255 or as given, then rows clipped to ||x|| <= clip_x."""
    if feature_range is not None:
        feats = unit_features(sub, feature_range)[0]  # the in-memory release's min-max, one pair or one a feature
    elif mechanism == "dpmix":
        return sub.astype(dtype, copy=False)
    elif sub.dtype == np.uint8:
        feats = sub.astype(np.float32) * np.float32(1 / 255)
    else:
        feats = sub.astype(np.float32)
    if mechanism == "poisson":
        norms = np.linalg.norm(feats, axis=1, keepdims=True)
        feats *= np.minimum(1.0, clip_x / np.maximum(norms, 1e-30)).astype(np.float32)
    return feats


GATHER_PIECE = 8192  # rows read between two page drops: at most 8192 pages (32 MB) of a memmap mapped at once


def _gather(arr: np.ndarray, rows: np.ndarray, release_pages: bool) -> np.ndarray:
    """``arr[rows]`` (rows sorted); for a memmap, in pieces whose pages are dropped from this process
    after each piece, so the resident set stays bounded even when a chunk touches most of the file."""
    if not (release_pages and _mapping(arr) is not None) or rows.size <= GATHER_PIECE:
        return np.asarray(arr[rows])
    out = np.empty((rows.size,) + arr.shape[1:], dtype=arr.dtype)
    for a in range(0, rows.size, GATHER_PIECE):
        out[a : a + GATHER_PIECE] = arr[rows[a : a + GATHER_PIECE]]
        _drop_pages(arr)
    return out


def _mapping(arr: np.ndarray) -> mmap.mmap | None:
    base: Any = arr
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "_mmap", None) if isinstance(base, np.memmap) else getattr(base, "base", None)
    return base if isinstance(base, mmap.mmap) else None


def _drop_pages(arr: np.ndarray) -> None:
    """Release the pages of a memory-mapped array from this process (they stay in the page cache)."""
    base = _mapping(arr)
    if base is not None and hasattr(base, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        try:
            base.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass
