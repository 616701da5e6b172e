"""Re-identification view: nearest training records to released points."""

import numpy as np
import pytest

from dpmix_core.audit.reidentification import LEAK_RATIO, nearest_records, pairwise_sq_distances
from dpmix_core.data import load_embedded
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training.data import pixels01


@pytest.fixture(scope="module")
def ds():
    return load_embedded()


def test_pairwise_distances_match_loop():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 7)), rng.normal(size=(9, 7))
    ref = np.array([[np.sum((x - y) ** 2) for y in b] for x in a])
    np.testing.assert_allclose(pairwise_sq_distances(a, b), ref, rtol=1e-10, atol=1e-10)


def test_l1_tiny_noise_finds_the_source_record(ds):
    r = nearest_records(ds, SynthesisConfig("dpmix", l=1, sigma_x=1e-3, sigma_y=1e-3), points=6, k=3, seed=2)
    assert np.all(r.distances[:, 0] < 0.05)  # noise norm ~ 1e-3 * 28
    assert np.all(r.ratios < 0.05) and r.leaked_fraction == 1.0
    assert np.all(r.separation < 0.05)
    # the nearest record is the source: same image up to the noise, and the released label is its label
    src = pixels01(ds.x_train[r.neighbour_indices[:, 0]]).reshape(r.released.shape)
    assert np.max(np.abs(src - r.released)) < 0.01
    np.testing.assert_array_equal(r.released_labels, r.neighbour_labels[:, 0])


def test_large_l_and_noise_do_not_reidentify(ds):
    r = nearest_records(ds, SynthesisConfig("dpmix", l=64, sigma_x=0.1, sigma_y=0.1), points=8, k=2, seed=2)
    assert np.all(r.ratios > 1.0) and r.leaked_fraction == 0.0
    assert np.all(r.separation > 0.8)


def test_shapes_order_and_determinism(ds):
    cfg = SynthesisConfig("dpmix", l=8, sigma_x=0.05)
    r = nearest_records(ds, cfg, points=5, k=4, seed=7)
    assert r.released.shape == (5, 28, 28) and r.released.dtype == np.float32
    assert r.neighbours.shape == (5, 4, 28, 28)
    assert r.neighbour_indices.shape == r.distances.shape == r.neighbour_labels.shape == (5, 4)
    assert r.ratios.shape == r.separation.shape == (5,) and r.released_labels.shape == (5,)
    assert np.all(np.diff(r.distances, axis=1) >= 0)
    # the distances are those of the returned images
    np.testing.assert_allclose(
        np.linalg.norm(r.neighbours - r.released[:, None], axis=(2, 3)), r.distances, rtol=1e-4, atol=1e-4
    )
    assert r.reference_distance > 0 and "[0,1]" in r.space
    assert 0.0 <= r.leaked_fraction <= 1.0 and LEAK_RATIO > 0
    assert r.synthesis.T == cfg.T
    assert set(r.epsilon) >= {"rdp-wor"}
    s = nearest_records(ds, cfg, points=5, k=4, seed=7)
    np.testing.assert_array_equal(r.released, s.released)
    np.testing.assert_array_equal(r.neighbour_indices, s.neighbour_indices)
    t = nearest_records(ds, cfg, points=5, k=4, seed=8)
    assert not np.array_equal(r.released, t.released)


def test_other_mechanisms_and_target_epsilon(ds):
    cc = nearest_records(
        ds, SynthesisConfig("class-centric", l=1, sigma_x=1e-4, preprocessing="zscore"), points=10, k=1
    )
    assert "z-scored with public constants" in cc.space and cc.released.shape == (10, 28, 28)
    assert np.all(cc.ratios < 0.1)  # l=1, no noise to speak of: the record itself
    po = nearest_records(ds, SynthesisConfig("poisson", l=4, sigma_x=0.01), points=3, k=2)
    assert "clipped" in po.space and po.distances.shape == (3, 2)
    cfg = SynthesisConfig("dpmix", l=16, T=10000, target_epsilon=4.0, accountant="rdp-wor")
    te = nearest_records(ds, cfg, points=4)
    assert abs(te.epsilon["rdp-wor"] - 4.0) < 1e-3  # calibrated for the configured T, not the small view
    assert te.synthesis.sigma_x > 1.0 and te.leaked_fraction == 0.0


@pytest.mark.parametrize(
    "cfg, kwargs, match",
    [
        (SynthesisConfig("label-laplace"), {}, "label-laplace"),
        (SynthesisConfig("dpmix", sigma_x=0.1), dict(points=0), "points must be"),
        (SynthesisConfig("dpmix", sigma_x=0.1), dict(k=0), "k must be"),
        (SynthesisConfig("dpmix", sigma_x=0.1), dict(k=4001), "k must be"),
        (SynthesisConfig("dpmix", sigma_x=0.1), dict(points=2.5), "points must be"),
    ],
)
def test_bad_inputs(ds, cfg, kwargs, match):
    with pytest.raises(ValueError, match=match):
        nearest_records(ds, cfg, **kwargs)


def test_bad_types(ds):
    with pytest.raises(ValueError, match="SynthesisConfig"):
        nearest_records(ds, {"mechanism": "dpmix"})
    with pytest.raises(ValueError, match="Dataset"):
        nearest_records(None, SynthesisConfig("dpmix", sigma_x=0.1))
