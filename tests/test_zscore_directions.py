"""bench/zscore_directions.py (REPRODUCTION §3b): the directions it reports are the ones the z-scores give."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("zscore_directions")


def _standardised(rng: np.random.Generator, n: int, d: int, mean: float, std: float) -> np.ndarray:
    """Rows whose every column has exactly this mean and (population) std."""
    x = rng.normal(size=(n, d))
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return mean + std * x


def test_per_pixel_statistics_equal_to_the_global_constants_point_every_record_the_same_way(bench):
    rng = np.random.default_rng(0)
    train = _standardised(rng, 500, 12, 3.0, 2.0)
    row = bench.directions_of(train, train, (3.0, 2.0))
    assert row["mean image norm (global z)"] == pytest.approx(0.0, abs=1e-9)
    for key in ("cos(global, per-pixel private) least", "cos(per-pixel private, per-pixel test) least"):
        assert row[key] == pytest.approx(1.0, abs=1e-9)


def test_a_mean_image_the_global_z_score_leaves_in_is_measured_and_turns_the_records(bench):
    rng = np.random.default_rng(1)
    train = _standardised(rng, 500, 12, 3.0, 2.0)
    train[:, 0] += 8.0  # pixel 0's mean is 11, not the global 3: the mean image after the global z-score is 4 e_0
    row = bench.directions_of(train, train + rng.normal(scale=0.3, size=train.shape), (3.0, 2.0))
    assert row["mean image norm (global z)"] == pytest.approx(4.0)
    assert row["cos(global, per-pixel private) median"] < 0.9
    assert 0.9 < row["cos(per-pixel private, per-pixel test) median"] < 1.0
