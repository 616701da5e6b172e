"""Privacy defaults (issue 11): every epsilon the product prints is a bound on the release it describes.

- the guarantee label follows the release (mechanism x preprocessing x label protection), everywhere;
- z-scoring with the private data's statistics leaks through points of *other* classes (so it is never covered);
- the label-protecting class-centric accounting (pool N_min - 1, 2 T_k releases) bounds the exact privacy loss;
- Poisson mixing takes its rate from the stated public n;
- run keys written by v0.1 stay valid, and old rows keep the meaning they had.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, SampledWithoutReplacementDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import rdp_privacy_accountant as rdp
from scipy.special import logsumexp

from dpmix_core.data import load_dataset
from dpmix_core.experiments.config import RunConfig, run_key
from dpmix_core.mechanisms import class_centric_mix, poisson_mix
from dpmix_core.privacy.accountants import ACCOUNTANTS, MixingSetting, applicable_accountants, get_accountant
from dpmix_core.privacy.release import PRIVATE_NORMALISATION, MixingRelease, Protects
from dpmix_core.synthesis.export import privacy_card
from dpmix_core.synthesis.pipeline import MECHANISMS, PREPROCESSING, SynthesisConfig, planned_release, synthesize

FEATURES_ONLY = "rigorous upper bound (features only; labels not protected)"
NOT_COVERED = f"not covered: {PRIVATE_NORMALISATION}"


@pytest.fixture(scope="module")
def ds():
    return load_dataset("embedded")


def _expected_guarantee(accountant: str, preprocessing: str, protect_labels: bool) -> str:
    if preprocessing == "zscore-private":
        return NOT_COVERED
    if not ACCOUNTANTS[accountant].rigorous:
        return "approximation (not an upper bound)"
    return "rigorous upper bound" if protect_labels else FEATURES_ONLY


def _combinations():
    for mechanism in MECHANISMS:
        if mechanism == "label-laplace":
            continue
        preps = {
            "class-centric": tuple(p for p in PREPROCESSING if p != "clip"),
            "dpmix": ("unit", "clip"),  # clip: DPFMix App. E.3's DPMix on records clipped to ||x||, ||y|| <= 1
        }.get(mechanism, ("unit",))
        labels = (True, False) if mechanism == "class-centric" else (True,)
        yield from itertools.product((mechanism,), preps, labels)


@pytest.mark.parametrize("mechanism, preprocessing, protect_labels", list(_combinations()))
def test_guarantee_label_follows_the_release(ds, mechanism, preprocessing, protect_labels):
    """'rigorous upper bound' exactly when the accountant is rigorous and its assumptions hold -- in the card too."""
    cfg = SynthesisConfig(
        mechanism, l=8, T=200, sigma_x=2.0, preprocessing=preprocessing, protect_labels=protect_labels
    )
    release = planned_release(cfg, ds)
    results = [acc.epsilon(release, 1e-5) for acc in applicable_accountants(release)]
    assert results
    for r in results:
        assert r.guarantee == _expected_guarantee(r.accountant, preprocessing, protect_labels)
        assert r.upper_bound == (r.guarantee.startswith("rigorous upper bound"))
    card = privacy_card(synthesize(cfg, ds))
    assert [e["guarantee"] for e in card["epsilons"]] == [r.guarantee for r in results]
    if preprocessing == "zscore-private":
        assert any(c.startswith("not covered") for c in card["caveats"])
    if not protect_labels:
        assert any("labels not protected" in c for c in card["caveats"])


def test_defaults_are_covered_and_protect_labels(ds):
    """A class-centric release made with the defaults is covered and protects labels (thesis §4.2 [0,1] features)."""
    cfg = SynthesisConfig("class-centric", l=8, T=200, sigma_x=2.0)
    assert (cfg.preprocessing, cfg.protect_labels) == ("unit", True)
    release = planned_release(cfg, ds)
    assert release.covered and release.protects is Protects.FEATURES_AND_LABELS
    # z-scoring asks for public constants: the built-in datasets' documented ones are filled in
    z = planned_release(replace(cfg, preprocessing="zscore"), ds)
    assert z.covered and z.bounds.x.description == "||.||_2 <= 1"


def test_zscore_needs_public_constants_for_uploads(ds):
    upload = replace(ds, name="my-upload")
    with pytest.raises(ValueError, match="needs public constants"):
        planned_release(SynthesisConfig("class-centric", l=8, T=200, sigma_x=1.0, preprocessing="zscore"), upload)


def test_private_zscore_leaks_through_other_classes():
    """Replacing one record moves points of the *other* class under private z-scoring; never with public constants.

    The accountants assume a record moves only the points that contain it, by at most 2c/l: the issue's
    example (n = 2000, l = 512, c = 1, sigma = 0).
    """
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(2000, 16)).astype(np.uint8)
    y = np.repeat([0, 1], 1000)
    X2, y2 = X.copy(), y  # the neighbour: record 0 (class 0) replaced by an outlier; sampling is then identical
    X2[0] = 255
    base = dict(class_sizes=(1000, 1000), l=512, T=200, sigma_x=0.0, sigma_y=0.0, dx=16, dy=2, clip=1.0)

    def other_class_shift(preprocessing: str, **public) -> float:
        release = MixingRelease.class_centric(preprocessing=preprocessing, **base)
        a = class_centric_mix(X, y, num_classes=2, release=release, seed=3, **public)
        b = class_centric_mix(X2, y2, num_classes=2, release=release, seed=3, **public)
        ones = a.y[:, 1] == 1  # class-1 points: the replaced record is in none of them
        return float(np.linalg.norm(a.x[ones] - b.x[ones], axis=1).min())

    leak = other_class_shift("zscore-private")
    assert leak > 0, "private z-scoring should move every other-class point"
    assert other_class_shift("zscore", mean=np.full(16, 127.5), std=np.full(16, 74.0)) == 0.0
    private = MixingRelease.class_centric(preprocessing="zscore-private", **base)
    release = class_centric_mix(X, y, num_classes=2, release=private, seed=3).release
    assert not release.covered
    for acc in applicable_accountants(release):
        assert acc.epsilon(release, 1e-5).guarantee == NOT_COVERED


# --------------------------------------------------------------------------- the label-changing reading, checked


def _log_mixture_pdf(x: np.ndarray, means: np.ndarray, sigma: float) -> np.ndarray:
    """log of the uniform mixture of N(mean, sigma^2) over ``means``, at points x (log-space)."""
    z = (x[:, None] - means[None, :]) / sigma
    return logsumexp(-0.5 * z * z, axis=1) - math.log(len(means)) - math.log(sigma * math.sqrt(2 * math.pi))


def _subset_means(pool: np.ndarray, l: int) -> np.ndarray:
    return np.array([pool[list(c)].mean() for c in itertools.combinations(range(len(pool)), l)])


def _hockey_stick(logp: np.ndarray, logq: np.ndarray, eps: float, dx: float) -> float:
    """delta(eps) = int max(0, p - e^eps q): the exact delta of the pair at eps (numerical quadrature)."""
    return float(np.sum(np.maximum(0.0, np.exp(logp) - np.exp(eps + logq))) * dx)


@pytest.mark.parametrize("sigma", [0.3, 0.6])
def test_label_changing_accounting_bounds_the_exact_loss(sigma):
    """Record r = 1.0 leaves class a (pool {0,0,0,1} -> {0,0,0}) and joins class b ({0,0,0} -> {0,0,0,1}).

    Features in [0,1] (diameter 1), l = 2, one point per class (T_k = 1). The exact output densities of the
    pair are finite Gaussian mixtures; the joint output is the product over the two classes. The accounting
    of class_centric_release (pool N_min - 1, 2*T_k releases) must give an (eps, delta) the exact pair obeys
    in both directions.
    """
    l = 2
    a_with, a_without = np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 0.0])
    grid = np.linspace(-6 * sigma - 1, 2 + 6 * sigma, 3001)
    dx = grid[1] - grid[0]
    la_d = _log_mixture_pdf(grid, _subset_means(a_with, l), sigma)  # class a in D (has r)
    la_dp = _log_mixture_pdf(grid, _subset_means(a_without, l), sigma)  # class a in D' (r removed)
    # class b is the mirror image: without r' in D, with it in D'
    joint_d = la_d[:, None] + la_dp[None, :]
    joint_dp = la_dp[:, None] + la_d[None, :]
    setting = MixingSetting(n=7, l=l, T=2, sigma_x=sigma, sigma_y=sigma, dx=1, dy=1, class_sizes=(4, 3))
    acc = get_accountant("rdp-wor")
    release = acc.release_for(setting).accounting_view()
    assert (release.n, release.num_points) == (2, 2)  # N_min - 1 = 2, 2 * T_k = 2
    # the label part is identical in law (one-hot of the class + noise): only features move
    release = replace(release, sigma_y=1e12)
    for delta in (1e-2, 1e-3):
        eps = acc.epsilon(release, delta).epsilon
        exact = max(_hockey_stick(joint_d, joint_dp, eps, dx * dx), _hockey_stick(joint_dp, joint_d, eps, dx * dx))
        assert exact <= delta * (1 + 1e-6), (eps, exact, delta)
    # the check has teeth: the pair is far from indistinguishable at eps = 0 (total variation >> delta)
    assert _hockey_stick(joint_d, joint_dp, 0.0, dx * dx) > 0.05


def test_label_protected_epsilon_on_the_dpcda_setting():
    """DP-CDA's MNIST setting: labels protected costs more than the same-class swap (0.500 vs 0.406 in the review)."""
    sizes = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
    s = MixingSetting(n=sum(sizes), l=4, T=60000, sigma_x=6.0, sigma_y=6.0, clip=1.0, class_sizes=sizes)
    acc = get_accountant("rdp-wor")
    full = acc.epsilon(acc.release_for(s), 1e-5)
    swap = acc.epsilon(acc.release_for(replace(s, protect_labels=False)), 1e-5)
    assert full.epsilon > swap.epsilon
    assert (full.guarantee, swap.guarantee) == ("rigorous upper bound", FEATURES_ONLY)
    # the composition count, checked independently: 2 T_k releases on a pool of N_min - 1, through dp_accounting
    release = acc.release_for(s).accounting_view()
    assert (release.n, release.num_points) == (min(sizes) - 1, 2 * (60000 // 10))
    z = release.noise_multiplier()
    ref = rdp.RdpAccountant(orders=list(range(2, 65)), neighboring_relation=rdp.NeighborRel.REPLACE_ONE)
    ref.compose(
        SelfComposedDpEvent(SampledWithoutReplacementDpEvent(min(sizes) - 1, 4, GaussianDpEvent(z)), 2 * (60000 // 10))
    )
    assert full.epsilon <= ref.get_epsilon(1e-5) * (1 + 1e-9)  # never above Thm. 27 on the same events


# --------------------------------------------------------------------------- Poisson: the public n


def test_poisson_rate_uses_the_public_n():
    rng = np.random.default_rng(1)
    X = rng.random((1000, 4)).astype(np.float32) * 0.1
    y = rng.integers(0, 2, size=1000)
    release = MixingRelease.poisson(n=2000, m=50, T=4000, sigma_x=0.0, sigma_y=0.0)  # the stated public n
    out = poisson_mix(X, y, num_classes=2, release=release, seed=0)
    assert out.release.n == 2000 and out.release.sampling_rate == pytest.approx(50 / 2000)
    # realised batch size is Binomial(1000, 50/2000): mean 25; the label sum of a point is its batch size / m
    batch = out.y.sum(axis=1) * 50
    assert batch.mean() == pytest.approx(25, rel=0.03)
    with pytest.raises(ValueError, match="public n"):
        SynthesisConfig("dpmix", sigma_x=1.0, public_n=10)


def test_features_only_is_class_centric_only():
    with pytest.raises(ValueError, match="class-centric mixing only"):
        SynthesisConfig("dpmix", sigma_x=1.0, protect_labels=False)
    with pytest.raises(ValueError, match="class sizes"):
        MixingSetting(n=100, l=4, T=10, sigma_x=1.0, sigma_y=1.0, protect_labels=False)


# --------------------------------------------------------------------------- stored runs from v0.1


V01 = json.loads((Path(__file__).parent / "data" / "v01_run_keys.json").read_text())


@pytest.mark.parametrize(
    "row",
    V01["rows"],
    ids=lambda r: r["config"]["method"] + ":" + str((r["config"].get("synthesis") or {}).get("mechanism")),
)
def test_v01_run_keys_stay_valid(row):
    """Keys written by v0.1 are reproduced from the stored config: existing result stores stay valid."""
    cfg = RunConfig.from_dict(row["config"])
    assert run_key(cfg) == row["run_key"]
    assert run_key(cfg.to_dict()) == row["run_key"]  # and after a round trip in today's spelling


def test_v01_class_centric_rows_keep_their_meaning(ds):
    """A v0.1 class-centric 'zscore' row without constants used the private statistics and a same-class swap."""
    rows = [r for r in V01["rows"] if (r["config"].get("synthesis") or {}).get("mechanism") == "class-centric"]
    by_prep = {}
    for row in rows:
        syn = RunConfig.from_dict(row["config"]).synthesis
        by_prep[
            (row["config"]["synthesis"]["preprocessing"], row["config"]["synthesis"]["zscore_constants"] is None)
        ] = syn
        assert syn.protect_labels is False
    private = by_prep[("zscore", True)]
    assert private.preprocessing == "zscore-private"
    assert not planned_release(replace(private, target_epsilon=None, sigma_x=1.0), ds).covered
    assert by_prep[("zscore", False)].preprocessing == "zscore"
    # today's defaults are different releases, so they get new keys (no stale result is reused)
    new = RunConfig(
        "mixing",
        synthesis=replace(private, preprocessing="zscore", zscore_constants=None, protect_labels=True),
        model="dpcda-cnn",
    )
    assert run_key(new) not in {r["run_key"] for r in V01["rows"]}


def test_trade_off_plots_mark_uncovered_and_features_only_series():
    from dpmix_core.experiments.results import aggregate
    from dpmix_core.views.accuracy_figure import trade_off_figure

    def row(label, **syn):
        cfg = RunConfig(
            "mixing",
            synthesis=SynthesisConfig("class-centric", l=4, T=600, sigma_x=0.5, **syn),
            model="dpcda-cnn",
            label=label,
        )
        return {"config": cfg.to_dict(), "result": {"test_accuracy": 0.5, "epsilon": {"rdp-wor": 3.0}}}

    rows = [row("covered"), row("private", preprocessing="zscore-private"), row("swap", protect_labels=False)]
    agg = aggregate(rows, axis="sigma")
    assert dict(zip(agg["label"], agg["guarantee"])) == {
        "covered": "covered",
        "private": NOT_COVERED,
        "swap": "features only; labels not protected",
    }
    traces = {t.name: t for t in trade_off_figure(agg, "sigma").data}
    assert traces["private [ε not covered: private normalisation]"].marker.symbol == "x"
    assert traces["swap [ε: features only]"].marker.symbol == "diamond-open"
    assert traces["covered"].marker.symbol == "circle"


def test_streaming_poisson_rate_uses_the_public_n(tmp_path):
    from dpmix_core.synthesis.streaming import stream_release, synthesize_streaming

    rng = np.random.default_rng(2)
    X = (rng.random((1000, 4)) * 0.1).astype(np.float32)
    y = rng.integers(0, 2, size=1000)
    planned = stream_release(mechanism="poisson", n=1000, d=4, k=2, l=50, T=10, sigma_x=1.0, public_n=2000)
    assert planned.n == 2000 and planned.sampling_rate == pytest.approx(50 / 2000)
    out = synthesize_streaming(
        X,
        y,
        num_classes=2,
        mechanism="poisson",
        l=50,
        T=2000,
        sigma_x=0.0,
        sigma_y=0.0,
        out_path=tmp_path / "rel",
        public_n=2000,
        accountants=False,
    )
    assert out.release.n == 2000
    batch = np.load(tmp_path / "rel" / "y.npy").sum(axis=1) * 50  # realised batch sizes: Binomial(1000, 1/40)
    assert batch.mean() == pytest.approx(25, rel=0.05)


# --------------------------------------------------------------------------- the one release description


def test_a_release_description_cannot_contradict_itself():
    """The mechanism fixes sampling and adjacency; add/remove adjacency always protects labels; private z-scoring is
    never covered: a choice made on a page cannot be lost or contradicted on its way."""
    from dataclasses import replace as dc_replace

    from dpmix_core.privacy.release import Adjacency, Mechanism, Sampling

    dp = MixingRelease.dpmix(n=100, l=4, T=10, sigma_x=1.0, sigma_y=1.0, dx=4, dy=2)
    assert (dp.mechanism, dp.sampling, dp.adjacency) == (
        Mechanism.DPMIX,
        Sampling.WITHOUT_REPLACEMENT,
        Adjacency.REPLACE_ONE,
    )
    with pytest.raises(ValueError, match="dpmix mixing uses without-replacement sampling"):
        dc_replace(dp, sampling=Sampling.POISSON)
    poisson = MixingRelease.poisson(n=100, m=4, T=10, sigma_x=1.0, sigma_y=1.0)
    with pytest.raises(ValueError, match="add/remove-one adjacency adds or removes a whole record"):
        dc_replace(poisson, protects=Protects.FEATURES_ONLY)
    with pytest.raises(ValueError, match="class sizes describe class-centric mixing"):
        dc_replace(dp, class_sizes=(50, 50))
    with pytest.raises(ValueError, match="preprocessing must be one of"):
        dc_replace(dp, preprocessing="minmax-private")
    cc = MixingRelease.class_centric(
        class_sizes=(50, 50), l=4, T=10, sigma_x=1.0, sigma_y=1.0, dx=4, dy=2, preprocessing="zscore-private"
    )
    assert not cc.covered and cc.not_covered == PRIVATE_NORMALISATION
    with pytest.raises(ValueError, match="class sizes sum to 90, not n=100"):
        dc_replace(cc, class_sizes=(50, 40))
    with pytest.raises(ValueError, match="states its public class sizes"):
        dc_replace(cc, class_sizes=None)


def test_class_centric_is_accounted_through_its_view():
    """What was released (n = sum of the class sizes, the T asked for) is not what the theorem is applied to (the
    smallest pool, 2*T_k steps); every accountant and the dp_event use the view, so both give one epsilon."""
    release = MixingRelease.class_centric(class_sizes=(400, 300, 500), l=8, T=300, sigma_x=0.5, sigma_y=0.5, dx=6, dy=3)
    view = release.accounting_view()
    assert (release.n, release.num_points) == (1200, 300) and (view.n, view.num_points) == (299, 200)
    assert release.dp_event() == view.dp_event() and release.sampling_rate == view.sampling_rate
    for acc in applicable_accountants(release):
        assert acc.epsilon(release, 1e-5).epsilon == acc.epsilon(view, 1e-5).epsilon
    assert MixingRelease.dpmix(n=10, l=2, T=3, sigma_x=1, sigma_y=1, dx=1, dy=1).accounting_view().n == 10
