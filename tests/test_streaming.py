"""Streaming (larger-than-memory) releases: dpmix_core.synthesis.streaming.synthesize_streaming.

Bit-equality with the in-memory mechanisms is not required (the random streams are split per chunk);
the tests check the law instead: shapes, exact sampling without duplicates, unbiased means, the
noise level, and that memory does not grow with T or n.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from dpmix_core.cli.main import stream_progress
from dpmix_core.mechanisms import dpmix
from dpmix_core.privacy.release import MixingRelease
from dpmix_core.synthesis.streaming import default_chunk_points, load_release, synthesize_streaming


def _data(n=400, d=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, d), dtype=np.uint8), rng.integers(0, k, n)


def test_shapes_files_and_card(tmp_path):
    X, y = _data()
    out = synthesize_streaming(
        X, y, num_classes=3, l=8, T=1000, sigma_x=0.5, sigma_y=0.25, seed=3, out_path=tmp_path / "rel", chunk_points=128
    )
    assert out.chunks == 8 and out.chunk_points == 128
    x, yy, card = load_release(out.out_dir)
    assert isinstance(x, np.memmap) and x.shape == (1000, 6) and yy.shape == (1000, 3)
    assert x.dtype == np.float32 and yy.dtype == np.float32
    assert not (tmp_path / "rel.partial").exists()
    assert json.loads(out.card_path.read_text()) == card
    assert card["released"] == {"points": 1000, "feature_dim": 6, "label_dim": 3}
    names = {e["accountant"] for e in card["epsilons"]}
    assert {"lee2019", "dpcda", "rdp-wor"} <= names
    assert all(isinstance(e["epsilon"], float) and e["epsilon"] > 0 for e in card["epsilons"])
    assert out.release.n == 400 and out.release.mix_degree == 8 and out.release.num_points == 1000
    assert "not bit-identical" in card["streamed"]["note"]
    assert card["statement"].startswith("We release T = 1,000 synthetic points") and "n = 400" in card["statement"]


def test_exact_distinct_records_per_point(tmp_path):
    """Record i is 255 * e_i: a noise-free mixture is 1/l on the chosen records, so a duplicate shows as 2/l."""
    n, l = 40, 7
    X = (np.eye(n) * 255).astype(np.uint8)
    y = np.arange(n) % 2
    out = synthesize_streaming(
        X, y, num_classes=2, l=l, T=3000, sigma_x=0.0, sigma_y=0.0, seed=1, out_path=tmp_path / "r", chunk_points=100
    )
    x, yy, _ = load_release(out.out_dir)
    x = np.asarray(x) * l
    assert np.allclose(x, np.round(x), atol=1e-5)
    assert set(np.unique(np.round(x))) <= {0.0, 1.0}
    assert (np.round(x).sum(1) == l).all()
    assert np.allclose(yy.sum(1), 1.0, atol=1e-6)
    counts = np.round(x).sum(0)  # each record is chosen w.p. l/n per point
    expected = 3000 * l / n
    assert np.abs(counts - expected).max() < 6 * np.sqrt(expected)


def test_poisson_batches(tmp_path):
    n, m = 60, 6
    X = (np.eye(n) * 255).astype(np.uint8)
    y = np.zeros(n, dtype=np.int64)
    out = synthesize_streaming(
        X,
        y,
        num_classes=2,
        mechanism="poisson",
        l=m,
        T=4000,
        sigma_x=0.0,
        sigma_y=0.0,
        seed=2,
        out_path=tmp_path / "p",
        chunk_points=333,
    )
    x, yy, card = load_release(out.out_dir)
    hits = np.round(np.asarray(x) * m)
    assert set(np.unique(hits)) <= {0.0, 1.0}  # a record joins a batch at most once
    sizes = hits.sum(1)
    assert abs(sizes.mean() - m) < 0.2 and abs(sizes.var() - m * (1 - m / n)) < 0.8  # Binomial(n, m/n)
    assert np.allclose(yy[:, 0] * m, sizes)  # labels divided by m, not by the realised batch size
    assert {e["accountant"] for e in card["epsilons"]} >= {"rdp-poisson", "pld-poisson"}


def test_unbiased_and_same_law_as_in_memory(tmp_path):
    X, y = _data(n=300, d=5)
    l, T, sx, sy = 10, 20000, 0.3, 0.1
    out = synthesize_streaming(
        X, y, num_classes=3, l=l, T=T, sigma_x=sx, sigma_y=sy, seed=5, out_path=tmp_path / "s", chunk_points=1500
    )
    xs, ys, _ = load_release(out.out_dir)
    release = MixingRelease.dpmix(n=len(X), l=l, T=T, sigma_x=sx, sigma_y=sy, dx=X.shape[1], dy=3)
    mem = dpmix(X, y, num_classes=3, release=release, seed=6)
    mu_x = X.mean(0) / 255
    mu_y = np.bincount(y, minlength=3) / len(y)
    for ox, oy in ((np.asarray(xs), np.asarray(ys)), (mem.x, mem.y)):
        se = np.sqrt(sx**2 + 0.1) / np.sqrt(T)
        assert np.abs(ox.mean(0) - mu_x).max() < 5 * se
        assert np.abs(oy.mean(0) - mu_y).max() < 5 * np.sqrt(sy**2 + 0.25 / l) / np.sqrt(T)
    # variance = noise + mixing variance (finite-population correction): same for both paths
    var_s, var_m = np.asarray(xs).var(0), mem.x.var(0)
    assert np.allclose(var_s, var_m, rtol=0.06)
    pop = (X / 255).var(0) / l * (len(X) - l) / (len(X) - 1)
    assert np.allclose(var_s, sx**2 + pop, rtol=0.06)


def test_reproducible_and_memmap_source(tmp_path):
    X, y = _data(n=1000, d=4)
    src = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.uint8, shape=X.shape)
    src[:] = X
    src.flush()
    src = np.load(tmp_path / "X.npy", mmap_mode="r")
    lab = np.load(_save(tmp_path / "y.npy", y.astype(np.uint8)), mmap_mode="r")
    a = synthesize_streaming(
        src, lab, num_classes=3, l=4, T=999, sigma_x=1.0, seed=9, out_path=tmp_path / "a", chunk_points=100
    )
    b = synthesize_streaming(
        X, y, num_classes=3, l=4, T=999, sigma_x=1.0, seed=9, out_path=tmp_path / "b", chunk_points=100
    )
    assert np.array_equal(np.load(a.x_path), np.load(b.x_path))
    assert np.array_equal(np.load(a.y_path), np.load(b.y_path))
    c = synthesize_streaming(
        X, y, num_classes=3, l=4, T=999, sigma_x=1.0, seed=10, out_path=tmp_path / "c", chunk_points=100
    )
    assert not np.array_equal(np.load(a.x_path), np.load(c.x_path))


def _save(path, arr):
    np.save(path, arr)
    return path


def _peak_bytes(tmp_path, name, n, T, chunk, resident_elements=0):
    path = tmp_path / f"{name}_src.npy"
    src = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, 16))
    for a in range(0, n, 100_000):
        src[a : a + 100_000] = np.random.default_rng(a).integers(0, 256, (min(100_000, n - a), 16), dtype=np.uint8)
    src.flush()
    del src
    src = np.load(path, mmap_mode="r")
    lab = np.load(_save(tmp_path / f"{name}_y.npy", (np.arange(n) % 10).astype(np.uint8)), mmap_mode="r")
    tracemalloc.start()
    try:
        synthesize_streaming(
            src,
            lab,
            num_classes=10,
            l=16,
            T=T,
            sigma_x=0.5,
            seed=0,
            out_path=tmp_path / f"{name}_out",
            chunk_points=chunk,
            accountants=False,
            resident_elements=resident_elements,
        )
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_bounded_in_T_and_n(tmp_path):
    chunk = 512
    base = _peak_bytes(tmp_path, "base", n=20_000, T=2_048, chunk=chunk)
    more_T = _peak_bytes(tmp_path, "moreT", n=20_000, T=163_840, chunk=chunk)
    more_n = _peak_bytes(tmp_path, "moren", n=400_000, T=2_048, chunk=chunk)
    # the whole output alone would be 163840 x 16 x 4 = 10.5 MB and the source 6.4 MB: neither is held
    assert more_T < 1.5 * base + 200_000, (base, more_T)
    assert more_n < 1.5 * base + 200_000, (base, more_n)
    assert more_T < 4_000_000 and more_n < 4_000_000


def test_errors(tmp_path):
    X, y = _data()
    kw = dict(num_classes=3, l=4, T=10, sigma_x=1.0, seed=0)
    with pytest.raises(ValueError, match="mechanism"):
        synthesize_streaming(X, y, mechanism="class-centric", out_path=tmp_path / "a", **kw)
    with pytest.raises(ValueError, match="feature_range"):
        synthesize_streaming(X.astype(np.float32), y, out_path=tmp_path / "a", **kw)
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.2"):
        synthesize_streaming(X, y + 1, out_path=tmp_path / "a", **kw)
    assert not (tmp_path / "a").exists() and not (tmp_path / "a.partial").exists()
    with pytest.raises(ValueError, match="must not exceed"):
        synthesize_streaming(X, y, out_path=tmp_path / "a", **{**kw, "l": 401})
    synthesize_streaming(X, y, out_path=tmp_path / "a", **kw)
    with pytest.raises(ValueError, match="exists"):
        synthesize_streaming(X, y, out_path=tmp_path / "a", **kw)
    synthesize_streaming(X, y, out_path=tmp_path / "a", overwrite=True, **kw)
    # float features with a public range
    out = synthesize_streaming(
        X / 255.0, y, out_path=tmp_path / "f", feature_range=(0.0, 1.0), **{**kw, "sigma_x": 0.0, "sigma_y": 0.0}
    )
    assert 0 <= np.load(out.x_path).min() and np.load(out.x_path).max() <= 1
    assert default_chunk_points(256, 784) >= 1 and default_chunk_points(1, 1) == 1 << 23


@pytest.mark.parametrize("mechanism", ["dpmix", "poisson"])
def test_resident_and_chunked_modes_have_the_same_law(tmp_path, mechanism):
    n, l, T = 40, 5, 4000
    X = (np.eye(n) * 255).astype(np.uint8)
    y = np.arange(n) % 2
    outs = {}
    for mode, chunk in (("resident", None), ("chunked", 300)):
        out = synthesize_streaming(
            X,
            y,
            num_classes=2,
            mechanism=mechanism,
            l=l,
            T=T,
            sigma_x=0.0,
            sigma_y=0.0,
            seed=1,
            out_path=tmp_path / mode,
            chunk_points=chunk,
        )
        x, _, card = load_release(out.out_dir)
        assert card["streamed"]["mode"] == mode
        outs[mode] = np.round(np.asarray(x) * l)
    for hits in outs.values():
        assert set(np.unique(hits)) <= {0.0, 1.0}
        if mechanism == "dpmix":
            assert (hits.sum(1) == l).all()
        else:
            assert abs(hits.sum(1).mean() - l) < 0.2
        assert np.abs(hits.sum(0) - T * l / n).max() < 6 * np.sqrt(T * l / n)
    again = synthesize_streaming(
        X,
        y,
        num_classes=2,
        mechanism=mechanism,
        l=l,
        T=T,
        sigma_x=0.0,
        sigma_y=0.0,
        seed=1,
        out_path=tmp_path / "again",
    )
    np.testing.assert_array_equal(np.round(np.load(again.x_path) * l), outs["resident"])


def test_progress_after_each_chunk_in_both_modes(tmp_path, capsys):
    X, y = _data()
    seen: list[int] = []
    out = synthesize_streaming(
        X,
        y,
        num_classes=3,
        l=8,
        T=1000,
        sigma_x=0.5,
        seed=3,
        out_path=tmp_path / "c",
        chunk_points=128,
        on_chunk=seen.append,
    )
    assert seen == [*range(128, 1000, 128), 1000] and out.chunks == len(seen)  # chunked mode
    resident: list[int] = []
    out = synthesize_streaming(
        X, y, num_classes=3, l=8, T=50_000, sigma_x=0.5, seed=3, out_path=tmp_path / "r", on_chunk=resident.append
    )
    assert resident[-1] == 50_000 and resident == sorted(set(resident)) and out.chunks == len(resident)
    report = stream_progress(T=1000, every_s=0.0)  # the CLI's line: every call here, none at the end
    for done in (250, 1000):
        report(done)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("  250 of 1,000 points written (25%), about ") and "left" in lines[0]


@pytest.mark.parametrize(
    "options",
    [dict(mechanism="dpmix"), dict(mechanism="poisson", public_n=5000, clip_x=2.0, clip_y=0.5)],
)
def test_a_streamed_release_verifies_from_its_folder_or_card(tmp_path, capsys, options):
    """Its card holds the recipe and the release description, as an in-memory release's does: ``verify`` and
    ``report --release`` recompute every epsilon (they could not read a streamed card before)."""
    from dpmix_core.cli.main import main
    from dpmix_core.experiments.release_files import read_card, read_release, verify_card

    X, y = _data()
    out = synthesize_streaming(
        X, y, num_classes=3, l=8, T=500, sigma_x=0.5, seed=3, out_path=tmp_path / "rel", **options
    )
    card = read_card(out.out_dir)
    assert card == read_card(out.card_path) == out.card
    check = verify_card(card)
    assert check.matches and len(check.rows) == len(card["epsilons"]) >= 2, check.reason
    assert check.release == out.release
    edited = {**card, "epsilons": [{**card["epsilons"][0], "epsilon": card["epsilons"][0]["epsilon"] / 2}]}
    assert not verify_card(edited).matches  # the check can fail
    assert main(["verify", str(out.out_dir)]) == 0 and "verified" in capsys.readouterr().out
    with pytest.raises(ValueError, match="streamed release"):
        read_release(out.out_dir)  # no dataset named: nothing to score a model on
