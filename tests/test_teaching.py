"""Unit tests for dpmix_core.teaching (the maths behind the "DP foundations" page)."""

import math

import numpy as np
import pytest

from dpmix_core.data import load_embedded
from dpmix_core.mechanisms import GaussianRelease, LaplaceRelease
from dpmix_core.teaching import (
    dp_histograms,
    dp_mean_images,
    gaussian_method_for,
    guarantee_text,
    histogram_figure,
    image_mosaic,
    label_accuracy_figure,
    label_change_example,
    label_noise_scale,
    label_noise_scales,
    label_release_accuracy,
    label_scale_figure,
    label_sensitivity,
    mean_images_figure,
    noise_std,
    nonprivate_pca,
    orient_components,
    pca_comparison,
    pca_grid_figure,
    pca_preprocess,
    release_table,
    subsample_indices,
)


@pytest.fixture(scope="module")
def mnist():
    ds = load_embedded()
    return ds.x_train, ds.y_train


@pytest.fixture(scope="module")
def small():
    """200 fake 6x6 uint8 images, 4 classes."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 50)
    x = (rng.random((200, 6, 6)) * 255).astype(np.uint8)
    return x, y


@pytest.fixture(scope="module")
def pca_result(mnist):
    return pca_comparison(mnist[0], epsilons=(10.0, 2.0, 0.1), num_components=10, delta=1e-5, seed=0)


# --------------------------------------------------------------------------- 1. labels


def test_label_sensitivity_one_hot_vs_regression():
    assert label_sensitivity("one-hot", 10) == 2.0
    assert label_sensitivity("regression", 10) == 9.0
    assert label_sensitivity("one-hot", 3) == 2.0 and label_sensitivity("regression", 3) == 2.0
    with pytest.raises(ValueError, match="encoding must be one of"):
        label_sensitivity("ordinal", 10)


def test_worked_example_every_pair():
    for a in range(10):
        for b in range(10):
            if a == b:
                continue
            ex = label_change_example(a, b)
            assert ex.one_hot_distance == 2.0  # whatever the classes
            assert ex.number_distance == abs(a - b)
            assert ex.one_hot_old.shape == (10,) and ex.one_hot_old[a] == 1 and ex.one_hot_new[b] == 1
            assert (ex.one_hot_sensitivity, ex.number_sensitivity) == (2.0, 9.0)
    assert label_change_example(0, 9).number_distance == 9.0  # the worst case is attained
    table = label_change_example(3, 8).table()
    assert list(table["L1 distance"]) == [2.0, 5.0] and list(table["worst case Δf"]) == [2.0, 9.0]


@pytest.mark.parametrize("old, new, message", [(3, 3, "different labels"), (3, 10, "new_label"), (-1, 2, "old_label")])
def test_worked_example_bad_labels(old, new, message):
    with pytest.raises(ValueError, match=message):
        label_change_example(old, new)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0, 50.0])
def test_noise_scale_is_sensitivity_over_epsilon(eps):
    assert label_noise_scale(eps, "one-hot") == pytest.approx(2.0 / eps)
    assert label_noise_scale(eps, "regression") == pytest.approx(9.0 / eps)


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon_raises(eps, small):
    with pytest.raises(ValueError, match="epsilon"):
        label_noise_scale(eps, "one-hot")
    with pytest.raises(ValueError, match="epsilon"):
        dp_mean_images(*small, label=0, epsilon=eps, delta=1e-5, num_classes=4)
    with pytest.raises(ValueError, match="epsilon"):
        dp_histograms(small[1], num_classes=4, epsilon=eps, delta=1e-5)


def test_noise_scale_table():
    eps = [0.1, 1.0, 10.0]
    t = label_noise_scales(eps)
    assert len(t) == 6 and set(t["encoding"]) == {"one-hot", "regression"}
    np.testing.assert_allclose(t["scale"], t["sensitivity"] / t["epsilon"])
    np.testing.assert_allclose(t["std"], math.sqrt(2) * t["scale"])
    with pytest.raises(ValueError, match="at least one"):
        label_noise_scales([])


def test_label_release_accuracy(mnist):
    y = mnist[1]
    acc = label_release_accuracy(y, num_classes=10, epsilons=[0.05, 100.0], seed=1)
    assert list(acc.columns) == ["epsilon", "encoding", "accuracy", "scale"] and len(acc) == 4
    a = acc.set_index(["epsilon", "encoding"])["accuracy"]
    assert a[(100.0, "one-hot")] > 0.99 and a[(100.0, "regression")] > 0.9
    assert a[(0.05, "one-hot")] < 0.2 and a[(0.05, "regression")] < 0.2  # chance is 0.1
    again = label_release_accuracy(y, num_classes=10, epsilons=[0.05, 100.0], seed=1)
    assert acc.equals(again)
    # one-hot beats regression at a moderate epsilon: sensitivity 2 vs 9
    mid = label_release_accuracy(y, num_classes=10, epsilons=[10.0], seed=0).set_index("encoding")["accuracy"]
    assert mid["one-hot"] > mid["regression"] + 0.2


# --------------------------------------------------------------------------- 2. Laplace vs Gaussian


def test_gaussian_method_choice():
    assert gaussian_method_for(0.5) == "classic"
    assert gaussian_method_for(1.0) == "analytic" and gaussian_method_for(7.0) == "analytic"
    assert gaussian_method_for(0.5, "analytic") == "analytic"
    with pytest.raises(ValueError, match="ε < 1"):
        gaussian_method_for(2.0, "classic")
    with pytest.raises(ValueError, match="calibration must be one of"):
        gaussian_method_for(0.5, "fancy")


def test_mean_images_shapes_and_releases(mnist):
    x, y = mnist
    cmp = dp_mean_images(x, y, label=3, epsilon=2.0, delta=1e-5, seed=0)
    n3 = int(np.sum(y == 3))
    assert cmp.n == n3 and cmp.image_shape == (28, 28)
    for which in ("true", "laplace", "gaussian"):
        img = cmp.image(which)
        assert img.shape == (28, 28) and img.min() >= 0 and img.max() <= 1
    np.testing.assert_allclose(cmp.image("true"), x[y == 3].mean(axis=0) / 255.0)
    lap, gau = cmp.laplace.release, cmp.gaussian.release
    assert isinstance(lap, LaplaceRelease) and lap.sensitivity == pytest.approx(784 / n3)
    assert lap.scale == pytest.approx(784 / n3 / 2.0)
    assert isinstance(gau, GaussianRelease) and gau.sensitivity == pytest.approx(28 / n3)
    assert gau.method == "analytic" and gau.delta == 1e-5
    assert dp_mean_images(x, y, label=3, epsilon=0.5, delta=1e-5, seed=0).gaussian.release.method == "classic"
    again = dp_mean_images(x, y, label=3, epsilon=2.0, delta=1e-5, seed=0)
    np.testing.assert_array_equal(cmp.laplace.value, again.laplace.value)
    with pytest.raises(ValueError, match="which must be one of"):
        cmp.image("median")


def test_larger_epsilon_gives_closer_mean_on_average(mnist):
    x, y = mnist

    def mean_err(eps):
        runs = [dp_mean_images(x, y, label=7, epsilon=eps, delta=1e-5, seed=s) for s in range(5)]
        return np.mean([r.laplace_rmse for r in runs]), np.mean([r.gaussian_rmse for r in runs])

    lap_lo, gau_lo = mean_err(1.0)
    lap_hi, gau_hi = mean_err(10.0)
    assert lap_hi < lap_lo and gau_hi < gau_lo
    assert gau_lo < lap_lo  # 784 pixels: L2 sensitivity sqrt(d)/n beats L1 d/n


@pytest.mark.parametrize("label", [10, -1, 2.5, "3", True])
def test_unknown_class_raises(mnist, label):
    with pytest.raises(ValueError, match="Unknown class"):
        dp_mean_images(*mnist, label=label, epsilon=1.0, delta=1e-5)


def test_empty_class_and_bad_inputs(small):
    x, y = small
    with pytest.raises(ValueError, match="no image has this label"):
        dp_mean_images(x, y, label=4, epsilon=1.0, delta=1e-5, num_classes=5)
    with pytest.raises(ValueError, match="delta"):
        dp_mean_images(x, y, label=0, epsilon=1.0, delta=0.0, num_classes=4)
    with pytest.raises(ValueError, match="ε < 1"):
        dp_mean_images(x, y, label=0, epsilon=1.0, delta=1e-5, calibration="classic", num_classes=4)
    with pytest.raises(ValueError, match="same length"):
        dp_mean_images(x[:10], y, label=0, epsilon=1.0, delta=1e-5, num_classes=4)
    with pytest.raises(ValueError, match="seed"):
        dp_mean_images(x, y, label=0, epsilon=1.0, delta=1e-5, num_classes=4, seed=-3)


def test_histograms(mnist):
    y = mnist[1]
    h = dp_histograms(y, num_classes=10, epsilon=1.0, delta=1e-5, seed=0)
    assert h.true.sum() == len(y) and h.true.shape == (10,)
    np.testing.assert_array_equal(h.true, np.bincount(y, minlength=10))
    for stat in (h.laplace, h.gaussian):
        assert stat.value.shape == (10,)
        sd = noise_std(stat.release)
        assert abs(stat.value.sum() - len(y)) < 6 * sd * math.sqrt(10)
    assert h.laplace.release.sensitivity == 2.0 and h.gaussian.release.sensitivity == pytest.approx(math.sqrt(2))
    frame = h.frame()
    assert len(frame) == 30 and frame.groupby("release")["count"].sum()["true"] == len(y)
    with pytest.raises(ValueError, match="label_names"):
        h.frame(["a", "b"])
    with pytest.raises(ValueError, match=r"0\.\.9"):
        dp_histograms(np.array([0, 11]), num_classes=10, epsilon=1.0, delta=1e-5)


def test_noise_std_and_release_table(small):
    cmp = dp_mean_images(*small, label=1, epsilon=0.5, delta=1e-6, num_classes=4, seed=3)
    h = dp_histograms(small[1], num_classes=4, epsilon=0.5, delta=1e-6, seed=3)
    lap, gau = cmp.laplace.release, cmp.gaussian.release
    assert noise_std(lap) == pytest.approx(math.sqrt(2) * lap.scale)
    assert noise_std(gau) == gau.sigma
    assert guarantee_text(lap) == "pure 0.5-DP (δ = 0)"
    assert guarantee_text(gau).startswith("(0.5, 1e-06)-DP") and "classic" in guarantee_text(gau)
    t = release_table(cmp.rows() + h.rows())
    assert len(t) == 4 and list(t["mechanism"]) == ["Laplace", "Gaussian"] * 2
    assert list(t["δ"]) == ["0", "1e-06", "0", "1e-06"]
    assert t["adjacency"].str.contains("replace-one").all()
    assert t["description"].str.contains("DP").all()
    assert "36·1/50" in t.loc[0, "sensitivity"] and "√36·1/50" in t.loc[1, "sensitivity"]


# --------------------------------------------------------------------------- 3. PCA


def test_subsample_indices():
    np.testing.assert_array_equal(subsample_indices(10, 50), np.arange(10))
    idx = subsample_indices(1000, 100, seed=4)
    assert len(idx) == 100 and len(np.unique(idx)) == 100 and np.all(np.diff(idx) > 0) and idx.max() < 1000
    np.testing.assert_array_equal(idx, subsample_indices(1000, 100, seed=4))
    with pytest.raises(ValueError, match="max_samples"):
        subsample_indices(10, 0)


def test_nonprivate_pca_matches_numpy_up_to_sign():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 12)) * np.geomspace(1.0, 0.05, 12)  # well-separated spectrum
    comps, values = nonprivate_pca(X, 5)
    Xf = pca_preprocess(X)
    _, s, vt = np.linalg.svd(Xf, full_matrices=False)
    np.testing.assert_allclose(values, s[:5] ** 2 / len(X), rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(comps * vt[:5], axis=1)), 1.0, atol=1e-8)
    assert np.all(np.linalg.norm(Xf, axis=1) <= 1 + 1e-12)
    with pytest.raises(ValueError, match="must not exceed"):
        nonprivate_pca(X, 13)


def test_orient_components():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    c = orient_components(-q.T)
    assert np.all(c[np.arange(8), np.argmax(np.abs(c), axis=1)] > 0)
    np.testing.assert_allclose(c @ c.T, np.eye(8), atol=1e-12)
    np.testing.assert_allclose(np.abs(c), np.abs(q.T))


def test_pca_comparison(pca_result, mnist):
    p = pca_result
    n = len(mnist[0])
    assert p.components.shape == (4, 10, 784) and p.images().shape == (4, 10, 28, 28)
    assert p.epsilons == (None, 10.0, 2.0, 0.1) and p.n_used == p.n_total == n
    for row in p.components:
        np.testing.assert_allclose(row @ row.T, np.eye(10), atol=1e-8)  # orthonormal
    assert p.releases[0] is None
    assert [r.method for r in p.releases[1:]] == ["analytic", "analytic", "classic"]
    for r in p.releases[1:]:
        assert r.sensitivity == pytest.approx(math.sqrt(2) / n) and r.delta == 1e-5
    assert p.captured[0] == 1.0 and p.captured[1] > p.captured[2] > p.captured[3]
    assert p.captured[1] > 0.9
    # the non-private row is exact PCA of the same (clipped) matrix
    exact, _ = nonprivate_pca(mnist[0], 10)
    np.testing.assert_allclose(np.abs(np.sum(p.components[0] * exact, axis=1)), 1.0, atol=1e-8)
    assert p.noise_spectral_norm(0) == 0 and p.noise_spectral_norm(3) > p.noise_spectral_norm(1)
    assert len(p.table()) == 4 and list(p.row_labels())[3] == "ε = 0.1 (classic)"


def test_pca_subsample_and_bad_inputs(mnist):
    x = mnist[0]
    p = pca_comparison(x, epsilons=(1.0,), num_components=3, max_samples=500, seed=0)
    assert p.n_used == 500 and p.n_total == len(x) and p.components.shape == (2, 3, 784)
    assert p.releases[1].sensitivity == pytest.approx(math.sqrt(2) / 500)
    q = pca_comparison(x, epsilons=(1.0,), num_components=3, max_samples=500, seed=1)
    np.testing.assert_array_equal(p.components[0], q.components[0])  # new seed: same data, new noise
    assert not np.array_equal(p.components[1], q.components[1])
    with pytest.raises(ValueError, match="epsilon"):
        pca_comparison(x[:50], epsilons=(0.0,))
    with pytest.raises(ValueError, match="ε < 1"):
        pca_comparison(x[:50], epsilons=(2.0,), calibration="classic")
    with pytest.raises(ValueError, match="at least one"):
        pca_comparison(x[:50], epsilons=())


# --------------------------------------------------------------------------- figures


def test_figures_build(mnist, pca_result):
    x, y = mnist
    eps = [0.1, 1.0, 10.0]
    assert len(label_scale_figure(label_noise_scales(eps), current=1.0).data) == 2
    acc = label_release_accuracy(y, num_classes=10, epsilons=eps, seed=0)
    assert len(label_accuracy_figure(acc, current=1.0, n=len(y)).data) == 2
    cmp = dp_mean_images(x, y, label=0, epsilon=1.0, delta=1e-5, seed=0)
    fig = mean_images_figure(cmp, label_name="0")
    assert len(fig.data) == 3 and fig.data[0].zmax == 1.0
    assert len(histogram_figure(dp_histograms(y, num_classes=10, epsilon=1.0, delta=1e-5, seed=0)).data) == 5
    grid = pca_grid_figure(pca_result)
    assert len(grid.data) == 1 and np.asarray(grid.data[0].z).shape == (4 * 31 - 3, 10 * 31 - 3)


def test_image_mosaic():
    imgs = np.arange(2 * 3 * 4 * 5, dtype=float).reshape(2, 3, 4, 5) - 30
    m = image_mosaic(imgs, gap=1)
    assert m.shape == (2 * 5 - 1, 3 * 6 - 1)
    assert np.isnan(m[4]).all() and np.isnan(m[:, 5]).all()  # the gaps
    np.testing.assert_allclose(m[:4, :5], imgs[0, 0] / np.abs(imgs[0, 0]).max())
    assert np.nanmax(np.abs(m)) == 1.0
    with pytest.raises(ValueError, match="rows, cols, H, W"):
        image_mosaic(imgs[0])
