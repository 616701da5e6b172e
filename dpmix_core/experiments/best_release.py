"""Best mixing release for a privacy budget: search m, T and lambda, choose on released points or privately.

Issue #13 §5. For a target (epsilon, delta), every candidate (m, T, lambda = sigma_y / sigma_x) of the
DPFMix feature-mixing release (ScatterNet features, per-sample GroupNorm, Poisson mixing, clip Cx = Cy = 1), or
of the Poisson mixing release of one's own file's columns, gets sigma_x calibrated to its share of the budget
(see "The search's own privacy" below). Candidates are scored with successive halving: a short training for all
of them, a longer one for the best few (the finalists); the winner is the finalist with the best score, on
held-out parts of the *synthetic releases* or, privately, on held-out real records.

Three criteria (``selection``); the first two read released points only, the third private held-out records:

* ``pooled_accuracy`` (the criterion by default on a named dataset, ``selection="pooled"``): every candidate's release holds out
  ``val_fraction`` of its points (its run's validation split, never trained on); their union is *one* pooled
  set (:func:`pool_held_out`, labels = argmax of the noisy labels) on which every candidate's model is scored.
  Same points, same labels for every candidate, so the scores compare models, not splits.
* ``val_accuracy`` (``selection="own"``, the earlier criterion, still reported): accuracy on the candidate's own
  held-out points. Those splits differ between candidates (other T, other noise per point), so it is
  biased towards less noise per point (smaller T, smaller lambda): on MNIST at epsilon = 1 it preferred
  T = 10000 while T = 30000 scored higher on the test set.
* **private** (the default on one's own file, ``selection="private"``): each candidate's model classifies the
  *even* rows of the held-out test split (real records, never mixed); the choice is the exponential mechanism on
  those counts (:func:`~dpmix_core.mechanisms.selection.gumbel_top_k`: sensitivity 1, one record changes a
  count by at most one), at ``selection_epsilon`` (10 % of the target by default) shared by its picks (the
  finalists, then the winner). The test accuracy reported is on the *odd* rows, which nothing read before.
  Why: the two scores above grade models on mixtures, and a mixture's argmax label is its plurality class, not a
  record's class; the points of a large-m release are mostly labelled with the majority class. On a 3-class table
  (20,000 records, ``bench/best_release_own_data.py``'s) at epsilon 4 over m = 16 to 1024, T = 4000, 16000 and
  lambda = 0.25, 0.5, the pooled score chose m = 16, T = 16000, lambda = 0.25 (pooled 89.5 %): 54.8 % on the
  held-out records; the private choice chose lambda = 0.5 of the same m and T: 81.3 % on the odd rows (before a
  candidate's collapse was read on its own release, the pooled score chose m = 1024: 56 %).

The test set: every training run goes through :func:`~dpmix_core.experiments.runner.run_config`, which
also evaluates on the real test split. Those numbers never reach a "pooled" or "own" choice: a :class:`Trial`
holds no test accuracy, selection (:func:`rank_trials`) sees only trials, and the winner's test accuracy is read
after the choice and reported apart from it. A "private" choice reads the even test rows only through the
exponential mechanism (its epsilon is part of the search's), and the odd rows are reported. Test accuracies of
the other candidates are never published.

Cost: the number of runs (candidates + finalists) and their estimated time are checked before any work
(:func:`search_refusal`), against the caller's budget and :mod:`dpmix_core.resources.limits`.

Two things a reader of the result must know (docs/REPRODUCTION.md, "§5 best release"):

* **The search's own privacy.** Every candidate is a release of the same data and the choice reads all of
  them, so what is published (the chosen release *and* the fact that it was chosen) is bounded by
  :func:`composed_epsilon` of every candidate release, plus ``selection_epsilon`` for a "private" choice
  (sequential composition of the releases' (epsilon, delta) with the choice's pure epsilon, Dwork & Roth 2014
  Thm 3.16; the held-out records are split off as every held-out split of this package is, and a record mixed
  into the releases or held out is covered either way). By default (``budget_covers="search"``) the target
  bounds that: the candidates share what the choice leaves (:func:`split_budget`). With
  ``budget_covers="release"`` each candidate is certified at the target alone and the larger total is reported
  beside it. Finalists retrain on the same release (same seed): no extra cost.
* **What the pooled score reads, and what covers it.** The pooled set is released data only (no test record,
  no private record): scoring on it is post-processing of the candidate releases. With
  ``budget_covers="search"`` every candidate release is composed within the target, so the pooled score, the
  choice and the chosen release together are covered by the target. With ``budget_covers="release"`` only the
  chosen release is certified at the target; the pooled score of *any* candidate reads every release (the own
  score reads one, but the choice reads them all either way), so what is published is covered by the reported
  ``search_epsilon`` (all releases composed), or by the target only if the choice is made on public data.
* **What validation accuracy ranks.** Held-out points of a release are noisy mixtures with noisy labels, so
  neither score is an accuracy on clean data; the pooled one is a common yardstick, weighted towards the
  candidates with more points (larger T, the union is not re-weighted).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dpmix_core.data import DATASET_NAMES, OWN_DATA, Categories
from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.presets import SPLIT_SIZES, estimate_seconds
from dpmix_core.experiments.run_data import load_run_dataset, own_data_sizes
from dpmix_core.mechanisms.selection import SelectionRelease, gumbel_top_k
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.resources.limits import (
    BYTES_PER_VALUE,
    Cost,
    LimitExceeded,
    Limits,
    check_cost,
    limits_from_env,
    mixing_cost,
)
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training.names import CLOSED_FORM_MODELS, FEATURE_MODELS
from dpmix_core.training.protocols import protocol_options

__all__ = [
    "ACCOUNTANT",
    "Candidate",
    "SearchSpace",
    "BestReleaseSearch",
    "Trial",
    "BestRelease",
    "scaled_milestones",
    "candidate_run",
    "planned_runs",
    "search_cost",
    "mix_degree_refusal",
    "search_refusal",
    "rank_trials",
    "calibrated_sigmas",
    "composed_epsilon",
    "split_budget",
    "run_search",
    "run_with_held_out",
    "pool_held_out",
    "pooled_accuracy",
    "PooledValidation",
    "SELECTIONS",
    "PRIVATE_SHARE",
    "certified_trials",
    "even_row_count",
    "odd_row_accuracy",
    "private_choice",
    "why_none",
    "chosen_release",
    "chosen_card",
    "release_collapse",
    "chosen_collapse",
    "OWN_DATA_MODELS",
    "own_data_space",
    "default_space",
    "dataset_space",
    "PAPER_SPACE_RECORDS",
]

BUDGET_COVERS = ("search", "release")
SELECTIONS = ("pooled", "own", "private")  # released held-out points (pooled, or each release's own), or records
PRIVATE_SHARE = 0.1  # the private choice's default share of the target epsilon
_SELECTION_STREAM = 0x5E1EC7  # spawn key of the private choice's noise (apart from every release's)
ACCOUNTANT = "pld-poisson"  # the exact PLD: every candidate is certified by a rigorous bound, not the CLT
_PAPER_MILESTONES = (0.4, 0.6, 0.8)  # DPFMix App. E.3: lr / 10 at epochs 80, 120, 160 of 200
SCATTER_CHANNELS = 81  # ScatterNet J=2, L=8 channels per colour channel, at 1/4 resolution
OWN_DATA_MODELS = ("linear", *CLOSED_FORM_MODELS)  # one's own file mixes its columns: no image, no ScatterNet


def _feature_dim(dataset: str) -> int:
    """d of the mixed records: ScatterNet features of a 28x28 grey (81 x 7 x 7) or 32x32 colour image."""
    return 3 * SCATTER_CHANNELS * 8 * 8 if dataset == "cifar10" else SCATTER_CHANNELS * 7 * 7


def _positive_ints(name: str, values: Iterable[Any]) -> tuple[int, ...]:
    out = tuple(values)
    if not out:
        raise ValueError(f"{name} needs at least one value.")
    for v in out:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be positive integers. Found {v!r}.")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} lists a value twice: {list(out)}.")
    return out


@dataclass(frozen=True)
class Candidate:
    """One release setting: expected batch m (the mix degree l), T released points, lambda = sigma_y / sigma_x."""

    m: int
    T: int
    sigma_ratio: float

    def __post_init__(self) -> None:
        _positive_ints("m", (self.m,))
        _positive_ints("T", (self.T,))
        if isinstance(self.sigma_ratio, bool) or not (
            isinstance(self.sigma_ratio, (int, float)) and math.isfinite(self.sigma_ratio) and self.sigma_ratio > 0
        ):
            raise ValueError(
                f"lambda (sigma_y / sigma_x) must be a positive finite number. Found {self.sigma_ratio!r}."
            )
        object.__setattr__(self, "sigma_ratio", float(self.sigma_ratio))

    def describe(self) -> str:
        return f"m={self.m}, T={self.T}, lambda={self.sigma_ratio:g}"


@dataclass(frozen=True)
class SearchSpace:
    """The grid searched: every combination of m, T and lambda (DPFMix fixes m=64, T=60000, lambda=1)."""

    mix_degrees: tuple[int, ...] = (64, 256)
    num_points: tuple[int, ...] = (10000, 60000)
    sigma_ratios: tuple[float, ...] = (0.5, 1.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mix_degrees", _positive_ints("m values", self.mix_degrees))
        object.__setattr__(self, "num_points", _positive_ints("T values", self.num_points))
        ratios = tuple(self.sigma_ratios)
        if not ratios:
            raise ValueError("lambda values need at least one value.")
        if len(set(ratios)) != len(ratios):
            raise ValueError(f"lambda values list a value twice: {list(ratios)}.")
        object.__setattr__(self, "sigma_ratios", tuple(Candidate(1, 1, r).sigma_ratio for r in ratios))

    def candidates(self) -> tuple[Candidate, ...]:
        """Every (m, T, lambda) of the grid, in a fixed order."""
        return tuple(Candidate(m, T, r) for m in self.mix_degrees for T in self.num_points for r in self.sigma_ratios)


@dataclass(frozen=True)
class BestReleaseSearch:
    """What to search and how much it may cost.

    Args:
        target_epsilon, delta: the budget every candidate is calibrated to (``pld-poisson``).
        space: the grid of (m, T, lambda).
        short_epochs: training of every candidate in the first round.
        long_epochs: training of the finalists (>= short_epochs).
        finalists: how many of the best first-round candidates train again, longer.
        max_runs: the budget in training runs (candidates + finalists); a larger search is refused.
        max_seconds: the budget in estimated seconds (2-core reference machine); a larger search is refused.
        train_limit, test_limit: fixed subsets of the splits (tests, quick looks); None: all records.
        val_fraction: share of each *release* held out to score candidates (their union is the pooled set).
        selection: "pooled": finalists ranked by accuracy on the pooled held-out points of every candidate
            release; "own": by accuracy on each release's own held-out points (the earlier criterion); "private":
            chosen by the exponential mechanism on the even test rows (module docstring). None (default):
            "pooled" on a named dataset, "private" on one's own file.
        selection_epsilon: the private choice's epsilon (all its picks together); None: 10 % of the target for
            "private", and no other selection takes one.
        budget_covers: "search" (default): the target bounds what is published, the chosen release *and* the
            choice, so the candidates share it (:func:`split_budget`); "release": every candidate is calibrated
            to the target by itself, and the search's composed epsilon (larger) is reported beside it.
        model: the classifier every candidate trains: "scatter-linear" (DPFMix's linear layer, default),
            "scatter-cnn" (Tramer & Boneh's small CNN on the same features), "linear", or "corrected-lsq" (least
            squares in closed form, corrected for each release's noise: no epochs, so no finalist round). Same
            protocol for all. None: "scatter-linear", or "corrected-lsq" on one's own file (seconds a candidate; on
            the 3-class table of ``bench/best_release_own_data.py`` it learns where the linear model trained by Adam
            often stays at the constant predictor).
        data_file, data_sha256, label_column, test_fraction, categories, feature_range: one's own file (dataset
            "file", :func:`~dpmix_core.experiments.run_data.open_data_file` gives the first four): its columns are
            mixed as they are (no ScatterNet: the features are the table's, scaled to [0, 1] by the public
            ``feature_range``, text columns one-hot over their public ``categories``), clipped to ||x|| <= 1 like
            the DPFMix release, and every candidate trains the own-data protocol of ``model`` ("linear":
            :data:`~dpmix_core.training.protocols.OWN_DATA_LINEAR` but for its epochs, or "corrected-lsq"). The
            test accuracy, read after the choice, is on the file's held-out records (never released).
        range_epsilon: one's own file with loose ``feature_range``: every candidate scales the columns with the same
            ranges, released privately at this epsilon alone (:mod:`dpmix_core.synthesis.private_ranges`; the same
            training records and seed give every candidate run the same ranges), and the ranges are one more release
            in the search's composition (the target covers them). None: the public bounds as they are.
        exact_features: with ``range_epsilon``, the one-hot features of ``categories`` (bounds (0, 1) exactly),
            which the ranges leave as they are (``SynthesisConfig.exact_features``; ``OwnData.exact_features``).
    """

    target_epsilon: float
    delta: float = 1e-5
    dataset: str = "mnist"
    space: SearchSpace = field(default_factory=SearchSpace)
    short_epochs: int = 5
    long_epochs: int = 30
    finalists: int = 2
    max_runs: int = 12
    max_seconds: float = 3600.0
    val_fraction: float = 0.1
    seed: int = 0
    train_limit: int | None = None
    test_limit: int | None = None
    data_dir: str | None = None  # where, not what: not part of the result's meaning
    device: str = "auto"
    budget_covers: str = "search"  # "search": the target bounds everything published; "release": each candidate
    selection: str | None = None  # "pooled" / "own": released points; "private": even test rows, exp. mechanism
    selection_epsilon: float | None = None  # "private": the choice's epsilon (default 10 % of the target)
    model: str | None = None  # None: scatter-linear, or corrected-lsq on one's own file
    data_file: str | None = None  # one's own .csv / .npz (dataset "file"); where, not what (data_sha256 is what)
    data_sha256: str | None = None
    label_column: str | None = None
    test_fraction: float = 0.2
    categories: Categories = ()
    feature_range: FeatureRange | None = None
    range_epsilon: float | None = None
    exact_features: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.target_epsilon, (int, float)) and 0 < self.target_epsilon < math.inf):
            raise ValueError(f"target epsilon must be a positive finite number. Found {self.target_epsilon!r}.")
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1). Found {self.delta!r}.")
        if self.dataset not in (*DATASET_NAMES, OWN_DATA):
            raise ValueError(f"Unknown dataset {self.dataset!r}. Choose one of: {', '.join(DATASET_NAMES)}.")
        if (self.dataset == OWN_DATA) != (self.data_file is not None):
            raise ValueError(
                f"dataset {OWN_DATA!r} is one's own file: give data_file (and data_sha256), and no file otherwise."
            )
        if self.model is None:
            object.__setattr__(self, "model", "corrected-lsq" if self.own_data else "scatter-linear")
        if self.own_data and self.model not in OWN_DATA_MODELS:
            raise ValueError(
                f"model {self.model!r} trains on ScatterNet features of images; one's own file mixes its columns: "
                f"choose one of {', '.join(OWN_DATA_MODELS)}."
            )
        if not isinstance(self.space, SearchSpace):
            raise ValueError(f"space must be a SearchSpace. Found {type(self.space).__name__}.")
        for name in ("short_epochs", "long_epochs", "finalists", "max_runs"):
            _positive_ints(name, (getattr(self, name),))
        if self.long_epochs < self.short_epochs:
            raise ValueError(
                f"the finalists train at least as long as the first round: long epochs {self.long_epochs} < "
                f"short epochs {self.short_epochs}."
            )
        if not (isinstance(self.max_seconds, (int, float)) and 0 < self.max_seconds < math.inf):
            raise ValueError(f"max_seconds must be a positive number. Found {self.max_seconds!r}.")
        if not (isinstance(self.val_fraction, (int, float)) and 0 < self.val_fraction <= 0.5):
            raise ValueError(
                f"val_fraction must be in (0, 0.5]: candidates are scored on the release's held-out part. "
                f"Found {self.val_fraction!r}."
            )
        if self.budget_covers not in BUDGET_COVERS:
            raise ValueError(f"budget_covers must be one of {', '.join(BUDGET_COVERS)}. Found {self.budget_covers!r}.")
        if self.model not in FEATURE_MODELS:
            raise ValueError(f"model must be one of {', '.join(FEATURE_MODELS)}. Found {self.model!r}.")
        if self.selection is None:
            object.__setattr__(self, "selection", "private" if self.own_data else "pooled")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}. Found {self.selection!r}.")
        self._check_selection_epsilon()
        self._check_range_epsilon()
        for name in ("train_limit", "test_limit"):
            value = getattr(self, name)
            if value is not None:
                _positive_ints(name, (value,))
        object.__setattr__(self, "target_epsilon", float(self.target_epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        object.__setattr__(self, "max_seconds", float(self.max_seconds))
        object.__setattr__(self, "val_fraction", float(self.val_fraction))
        candidate_run(self, self.space.candidates()[0], epochs=self.short_epochs)  # seed, device: RunConfig's checks

    def _check_selection_epsilon(self) -> None:
        if self.selection != "private":
            if self.selection_epsilon is not None:
                raise ValueError(
                    f"selection_epsilon is the private choice's budget; selection {self.selection!r} reads released "
                    "points only (no epsilon): drop it or choose selection 'private'."
                )
            return
        if self.selection_epsilon is None:
            object.__setattr__(self, "selection_epsilon", PRIVATE_SHARE * self.target_epsilon)
        eps = self.selection_epsilon
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
            raise ValueError(f"selection_epsilon must be a positive finite number. Found {eps!r}.")
        if self.budget_covers == "search" and eps >= self.target_epsilon:
            raise ValueError(
                f"selection_epsilon {eps:g} leaves nothing of the target {self.target_epsilon:g} for the releases: "
                "the target covers both; lower it."
            )
        object.__setattr__(self, "selection_epsilon", float(eps))

    def _check_range_epsilon(self) -> None:
        if self.range_epsilon is None:
            object.__setattr__(self, "exact_features", ())  # canonical: they only shape private ranges
            return
        from dpmix_core.synthesis.private_ranges import check_range_epsilon

        object.__setattr__(self, "range_epsilon", check_range_epsilon(self.range_epsilon))
        if not self.own_data or self.feature_range is None:
            raise ValueError("private ranges narrow the public bounds of one's own file's features: give both.")
        if self.budget_covers == "search" and self.range_epsilon >= self.release_budget:
            raise ValueError(
                f"the private ranges' epsilon {self.range_epsilon:g} leaves nothing of the target "
                f"{self.target_epsilon:g} for the releases{' and the choice' if self.selection_epsilon else ''}: "
                "the target covers them all; lower it."
            )

    def ranges_events(self) -> tuple[Any, ...]:
        """The private ranges as dp_accounting events (add/remove-one, as the Poisson candidates): one release that
        every candidate shares; () without them."""
        if self.range_epsilon is None:
            return ()
        from dpmix_core.synthesis.private_ranges import ROUNDS, range_noise_multiplier, ranges_item

        z = range_noise_multiplier(self.range_epsilon, self.delta, "add/remove-one")
        return (ranges_item(z, ROUNDS, "add/remove-one").event,)

    @property
    def criterion(self) -> str:
        """The selection, resolved ("pooled", "own" or "private"; ``selection`` None takes the data's default)."""
        assert self.selection is not None  # resolved in __post_init__
        return self.selection

    @property
    def release_budget(self) -> float:
        """The epsilon the candidate releases compose within: the target, less the private choice's share when the
        target covers the whole search."""
        if self.budget_covers == "search" and self.selection_epsilon is not None:
            return self.target_epsilon - self.selection_epsilon
        return self.target_epsilon

    @property
    def has_finalist_round(self) -> bool:
        """Whether the finalists train again (longer): there are finalists and more epochs for them."""
        return self.finalist_count > 0 and self.long_epochs > self.short_epochs

    def selection_picks(self, candidates: int) -> tuple[SelectionRelease, ...]:
        """The private choice's rounds among ``candidates`` eligible first-round trials: the finalists (top-k),
        then the winner among them; one pick without a finalist round. They share ``selection_epsilon`` equally:
        (finalists + 1) picks when there is a finalist round, whatever the number found eligible."""
        if self.selection_epsilon is None:
            raise ValueError(f"selection {self.selection!r} makes no private choice.")
        if not self.has_finalist_round:
            return (SelectionRelease(candidates, 1, self.selection_epsilon),)
        k = min(self.finalist_count, candidates)
        each = self.selection_epsilon / (self.finalist_count + 1)
        return SelectionRelease(candidates, k, each), SelectionRelease(k, 1, each)

    @property
    def own_data(self) -> bool:
        """Whether the search releases one's own file (its columns mixed as they are) rather than a named dataset's
        ScatterNet features."""
        return self.data_file is not None

    @property
    def finalist_count(self) -> int:
        """Finalists actually run: at most the number of candidates; none for a closed-form model (no epochs:
        a longer training is the same fit)."""
        if self.model in CLOSED_FORM_MODELS:
            return 0
        return min(self.finalists, len(self.space.candidates()))

    @property
    def first_round_epochs(self) -> int:
        """Epochs of the first round: ``short_epochs``, or 1 for a closed-form model (one step)."""
        return 1 if self.model in CLOSED_FORM_MODELS else self.short_epochs

    def training_length(self, epochs: int) -> str:
        """How long a trial trained, in words: "12 epochs", or "closed form"."""
        return "closed form" if self.model in CLOSED_FORM_MODELS else f"{epochs} epochs"


def scaled_milestones(epochs: int) -> tuple[int, ...]:
    """DPFMix App. E.3's lr drops (÷10 at 40/60/80 % of training) for a shorter run; () below 5 epochs."""
    if epochs < 5:
        return ()
    marks = sorted({max(1, round(epochs * f)) for f in _PAPER_MILESTONES})
    return tuple(m for m in marks if m < epochs)


def candidate_run(
    search: BestReleaseSearch,
    candidate: Candidate,
    *,
    epochs: int,
    sigma_x: float | None = None,
    sigma_y: float | None = None,
) -> RunConfig:
    """The training run of one candidate: the DPFMix Table 3 protocol (the search's model, scatter-linear by
    default; generalised KL, Adam 1e-3, batch 256, lr / 10 at 40/60/80 % of ``epochs``) on the candidate's
    feature-mixing release; on one's own file the own-data protocol of the search's model on the release of the
    file's columns (see :class:`BestReleaseSearch`).

    With ``sigma_x``/``sigma_y`` (already calibrated) the release uses them; without, it calibrates to the target.
    """
    calibrated = sigma_x is not None and sigma_y is not None
    features = "pixels" if search.own_data else "scattering"  # "pixels": the records' own values, a table's columns
    synthesis = SynthesisConfig(
        "poisson",
        l=candidate.m,
        T=candidate.T,
        sigma_x=sigma_x if calibrated else None,
        sigma_y=sigma_y if calibrated else None,
        sigma_ratio=candidate.sigma_ratio,
        target_epsilon=None if calibrated else search.target_epsilon,
        accountant=None if calibrated else ACCOUNTANT,
        delta=search.delta,
        clip_x=1.0,
        clip_y=1.0,
        features=features,
        feature_range=search.feature_range if search.range_epsilon is not None else None,
        range_epsilon=search.range_epsilon,
        exact_features=search.exact_features,
    )
    assert search.model is not None  # resolved by BestReleaseSearch
    common: dict[str, Any] = dict(
        synthesis=synthesis,
        model=search.model,
        epochs=epochs,
        val_fraction=search.val_fraction,
        train_limit=search.train_limit,
        test_limit=search.test_limit,
        seed=search.seed,
        label=f"best-release {candidate.describe()}",
        device=search.device,
    )
    if search.own_data:  # the file's own-data protocol for the model, its split and its public description
        file_fields = ("data_file", "data_sha256", "label_column", "test_fraction", "categories", "feature_range")
        protocol = protocol_options(search.model, mechanism="poisson", own_data=True)
        return RunConfig(
            "mixing", dataset=OWN_DATA, **protocol, **common, **{name: getattr(search, name) for name in file_fields}
        )
    milestones = scaled_milestones(epochs)
    return RunConfig(
        "mixing",
        dataset=search.dataset,
        features="scattering",
        loss="gkl",
        optimizer="adam",
        lr=1e-3,
        schedule="multistep" if milestones else "constant",
        lr_milestones=milestones,
        lr_gamma=0.1,
        batch_size=256,
        data_dir=search.data_dir,
        **common,
    )


def planned_runs(search: BestReleaseSearch) -> int:
    """Training runs the search makes: one per candidate, then one per finalist."""
    return len(search.space.candidates()) + search.finalist_count


def search_cost(search: BestReleaseSearch) -> Cost:
    """Estimated time (the runs' :func:`~dpmix_core.experiments.presets.estimate_seconds`, finalists at their
    longest candidate) and memory (the largest release held at once) of the whole search."""
    candidates = search.space.candidates()
    first = [estimate_seconds(candidate_run(search, c, epochs=search.short_epochs)) for c in candidates]
    longest = sorted(
        (estimate_seconds(candidate_run(search, c, epochs=search.long_epochs)) for c in candidates), reverse=True
    )
    seconds = sum(first) + sum(longest[: search.finalist_count])
    biggest = max(candidates, key=lambda c: c.T * c.m)
    _, d, k = _sizes(search)
    n = _training_records(search)
    release = mixing_cost(T=biggest.T, l=biggest.m, d=d, k=k, n=n)
    pooled = float(pooled_size(search)) * (d + k) * BYTES_PER_VALUE
    return Cost(
        what=f"a search of {planned_runs(search)} training runs", memory=release.memory + pooled, seconds=seconds
    )


def _sizes(search: BestReleaseSearch) -> tuple[int, int, int]:
    """(training records, features a mixed record, classes) of the search's data: the named dataset's, or its own
    file's split (read once a file, :func:`~dpmix_core.experiments.run_data.own_data_sizes`)."""
    if not search.own_data:
        return SPLIT_SIZES[search.dataset][0], _feature_dim(search.dataset), 10
    n_train, _, d = own_data_sizes(candidate_run(search, search.space.candidates()[0], epochs=1))
    return n_train, d, 10  # classes: an estimate (the memory is the features' when d is not tiny)


PAPER_SPACE_RECORDS = 60_000  # the papers' grid (m = 64, 256; T = 10000, 60000) is for MNIST's 60,000 records


def default_space(n_train: int) -> SearchSpace:
    """The grid searched when none is given, for ``n_train`` training records: the papers' (m = 64, 256; T = 10000,
    60000; lambda = 0.5, 1) from MNIST's size up, else :func:`own_data_space` (m = 16, 64; T = n, 4n): on the
    embedded sample's 4,000 records the papers' T = 60000 mixes every record into about 15 times as many points."""
    if n_train >= PAPER_SPACE_RECORDS:
        return SearchSpace()
    return own_data_space(n_train)


def dataset_space(dataset: str, train_limit: int | None = None) -> SearchSpace:
    """:func:`default_space` of a named dataset's training split (or its first ``train_limit`` records)."""
    n_train = SPLIT_SIZES[dataset][0]
    return default_space(n_train if train_limit is None else min(n_train, train_limit))


def own_data_space(n_train: int) -> SearchSpace:
    """The default grid on one's own file of ``n_train`` training records: m = 16 and 64 (those up to n/4), T = n
    and 4n (a release about the data's size, and one that trades noise per point for more points), lambda = 0.5, 1.

    The papers' defaults (m = 64, 256; T = 10000, 60000) are MNIST's: on a table of a few thousand records m = 256
    samples a large share of it into every point, and T = 60000 composes many more points than there are records.
    """
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 8:
        raise ValueError(f"a search on one's own file needs at least 8 training records. Found {n_train!r}.")
    degrees = tuple(m for m in (16, 64) if m <= n_train // 4) or (max(2, n_train // 4),)
    return SearchSpace(degrees, (n_train, 4 * n_train), (0.5, 1.0))


def pooled_size(search: BestReleaseSearch) -> int:
    """Points in the pooled validation set: round(val_fraction * T) of every candidate (held until the end)."""
    return sum(round(search.val_fraction * c.T) for c in search.space.candidates())


def _training_records(search: BestReleaseSearch) -> int:
    """The records a candidate mixes from: the data's training split, or its first ``train_limit`` records."""
    n_train = _sizes(search)[0]
    return n_train if search.train_limit is None else min(n_train, search.train_limit)


def mix_degree_refusal(search: BestReleaseSearch) -> str | None:
    """Why an m of the grid cannot be a release of this data (Poisson rate m / n above 1), in one line, or None."""
    n = _training_records(search)
    if too_many := [m for m in search.space.mix_degrees if m > n]:
        return (
            f"m = {', '.join(f'{m:,}' for m in too_many)} is more than the {n:,} training records a point mixes "
            "from (Poisson rate m / n must be at most 1): choose smaller m values."
        )
    return None


def search_refusal(search: BestReleaseSearch, limits: Limits | None = None) -> str | None:
    """Why the search would be refused before any work (one line), or None.

    Refused when an m exceeds the records a point mixes from (:func:`mix_degree_refusal`), when it needs more
    runs than ``search.max_runs``, more estimated seconds than
    ``search.max_seconds``, or more memory / job time than ``limits`` (default: the environment's).
    """
    if too_many := mix_degree_refusal(search):
        return too_many
    runs = planned_runs(search)
    if runs > search.max_runs:
        return (
            f"the search needs {runs} training runs ({len(search.space.candidates())} candidates + "
            f"{search.finalist_count} finalists), over the budget of {search.max_runs}: fewer m, T or lambda values, "
            "fewer finalists, or a larger run budget."
        )
    cost = search_cost(search)
    if cost.seconds > search.max_seconds:
        return (
            f"{cost.what} takes about {cost.seconds / 60:.1f} min (estimate), over the budget of "
            f"{search.max_seconds / 60:.1f} min: fewer candidates or epochs, or a larger time budget."
        )
    try:
        check_cost(cost, limits or limits_from_env(), change="the grid, the epochs or T", job=True)
    except LimitExceeded as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class Trial:
    """One training of one candidate, as selection sees it: no test accuracy here, by design.

    ``certified_epsilon``: the ``pld-poisson`` epsilon of the calibrated sigma (a rigorous bound, <= target).
    ``val_accuracy``: accuracy on the release's own held-out points (None when the run failed).
    ``error``: why the candidate has no score (calibration impossible, a limit), or None.
    ``pooled_accuracy``: accuracy on the pooled held-out points of every candidate release (one set for all
    trials, :func:`pool_held_out`); None when the run gave no model to score.
    ``collapsed``: the model did not learn, read on its release's held-out points and training history only
    (:func:`release_collapse`; a run's own flag also reads the test split, which must not reach the choice).
    """

    candidate: Candidate
    epochs: int
    sigma_x: float | None
    sigma_y: float | None
    certified_epsilon: float | None
    val_accuracy: float | None
    seconds: float
    collapsed: bool = False
    error: str | None = None
    pooled_accuracy: float | None = None

    def score(self, selection: str) -> float | None:
        """The trial's score under ``selection``: pooled_accuracy ("pooled") or val_accuracy ("own"); None for
        "private" (its scores are private counts, never published: only the choice is)."""
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}. Found {selection!r}.")
        if selection == "private":
            return None
        return self.pooled_accuracy if selection == "pooled" else self.val_accuracy

    @property
    def eligible(self) -> bool:
        """Scored, learned, and certified (the certificate is checked against the target by :func:`rank_trials`)."""
        return self.error is None and self.val_accuracy is not None and not self.collapsed

    def to_dict(self) -> dict:
        return asdict(self)


def rank_trials(trials: Iterable[Trial], *, target_epsilon: float, selection: str = "pooled") -> list[Trial]:
    """The eligible trials certified within ``target_epsilon`` and scored, best score first.

    ``selection``: "pooled" ranks by :attr:`Trial.pooled_accuracy`, "own" by :attr:`Trial.val_accuracy`
    ("private" has no public score: see :func:`certified_trials` and :func:`private_choice`).
    Ties keep the cheaper release (smaller T, then smaller m), then the grid order. Trials only: the
    choice cannot see any test accuracy.
    """
    ok = [t for t in certified_trials(trials, target_epsilon=target_epsilon) if t.score(selection) is not None]
    return sorted(ok, key=lambda t: (-(t.score(selection) or 0.0), t.candidate.T, t.candidate.m))


def certified_trials(trials: Iterable[Trial], *, target_epsilon: float) -> list[Trial]:
    """The eligible trials (scored, learned) certified within ``target_epsilon``, in their order."""
    return [
        t
        for t in trials
        if t.eligible and t.certified_epsilon is not None and t.certified_epsilon <= target_epsilon * (1 + 1e-9)
    ]


def even_row_count(correct: np.ndarray) -> int:
    """Correctly classified *even* rows of the test split (0, 2, 4, ...): the private choice's score (one record
    changes it by at most one)."""
    return int(np.count_nonzero(np.asarray(correct, dtype=bool)[0::2]))


def odd_row_accuracy(correct: np.ndarray) -> float:
    """Accuracy on the *odd* rows of the test split: what a private choice reports (it read the even rows)."""
    odd = np.asarray(correct, dtype=bool)[1::2]
    if not len(odd):
        raise ValueError("the test split has fewer than 2 records: no odd row to report on.")
    return float(np.mean(odd))


def private_choice(
    trials: Sequence[Trial], correct: Sequence[np.ndarray], release: SelectionRelease, seed: object
) -> list[Trial]:
    """The ``release.k`` trials picked by Gumbel noisy max on their even-row counts (``correct[i]``: trial i's
    correct / wrong on each test row), best first (:func:`~dpmix_core.mechanisms.selection.gumbel_top_k`)."""
    if len(trials) != len(correct):
        raise ValueError(f"{len(trials)} trials and {len(correct)} score rows: one a trial.")
    picks = gumbel_top_k([even_row_count(c) for c in correct], release, seed)
    return [trials[i] for i in picks]


@dataclass(frozen=True)
class PooledValidation:
    """One validation set for every candidate: the union of their held-out released points.

    ``x``: the points (rows, in the models' common input space); ``labels``: argmax of each point's noisy
    label; ``sources``: (candidate, number of its points) in the order they were pooled.
    """

    x: np.ndarray
    labels: np.ndarray
    sources: tuple[tuple[Candidate, int], ...]

    def __post_init__(self) -> None:
        if len(self.x) != len(self.labels) or len(self.x) != sum(count for _, count in self.sources):
            raise ValueError(
                f"pooled points, labels and sources disagree: {len(self.x)} points, {len(self.labels)} labels, "
                f"{sum(count for _, count in self.sources)} from the sources."
            )
        if not len(self.x):
            raise ValueError("the pooled validation set is empty: no candidate held out any released point.")


def pool_held_out(held_out: Iterable[tuple[Candidate, tuple[np.ndarray, np.ndarray]]]) -> PooledValidation:
    """The pooled validation set: every candidate's held-out (points, noisy labels), concatenated in the given order.

    Labels are the argmax of the noisy (soft) labels, the class the release says the point is. Released data
    only: scoring on it is post-processing of the releases (see the module docstring for what covers it).
    """
    parts = [(c, np.asarray(x), np.asarray(y)) for c, (x, y) in held_out]
    parts = [(c, x, y) for c, x, y in parts if len(x)]
    if not parts:
        raise ValueError("the pooled validation set is empty: no candidate held out any released point.")
    for c, x, y in parts:
        if y.ndim != 2 or len(y) != len(x):
            raise ValueError(f"{c.describe()}: held-out labels must be one row of class scores per point.")
    x = np.concatenate([x.reshape(len(x), -1) for _, x, _ in parts]).astype(np.float32, copy=False)
    labels = np.concatenate([y.argmax(axis=1) for _, _, y in parts])
    return PooledValidation(x, labels, tuple((c, len(x)) for c, x, _ in parts))


def pooled_accuracy(predict: Callable[[np.ndarray], np.ndarray], pool: PooledValidation) -> float:
    """Share of the pooled points whose predicted class (``predict``: points -> classes) is their label."""
    predicted = np.asarray(predict(pool.x))
    if predicted.shape != pool.labels.shape:
        raise ValueError(f"predict gave {predicted.shape} classes for {pool.labels.shape} pooled points.")
    return float(np.mean(predicted == pool.labels))


@dataclass(frozen=True)
class BestRelease:
    """The search's outcome: every trial, the chosen one, and (measured after choosing) its test accuracy."""

    search: BestReleaseSearch
    trials: tuple[Trial, ...]
    chosen: Trial
    test_accuracy: float
    epsilons: dict  # the chosen release's privacy card: every applicable accountant's epsilon
    seconds: float
    search_epsilon: float  # every candidate release composed (rdp-poisson), plus a private choice's epsilon: all of it
    pooled_sources: tuple[tuple[Candidate, int], ...] = ()  # the pooled validation set: (candidate, points)
    release_epsilon: float | None = None  # the candidate releases composed alone (None: search_epsilon)
    picks: tuple[SelectionRelease, ...] = ()  # a private choice's rounds (finalists, then the winner)
    warning: str | None = None  # read after the choice: the chosen model did not learn (on the reported rows)

    @property
    def test_rows(self) -> str:
        """Which test rows ``test_accuracy`` is on: "odd" after a private choice (it read the even rows), else "all"."""
        return "odd" if self.search.selection == "private" else "all"

    def privacy_note(self) -> str:
        """What the published result's epsilon is, in one sentence for the card, the CLI and the JSON."""
        count = len({t.candidate for t in self.trials if t.sigma_x is not None})
        sel = self.search.selection_epsilon
        releases = self.search_epsilon if self.release_epsilon is None else self.release_epsilon
        what = "the chosen release and the choice"
        how = f"rigorous, rdp-poisson composition, delta {self.search.delta:g}"
        if sel is not None:
            what = "the chosen release and the choice, made on held-out records"
            how = (
                f"rigorous: the releases' rdp-poisson composition {releases:.4g} at delta {self.search.delta:g} plus "
                f"the private choice's {sel:.4g} (exponential mechanism, delta 0), composed sequentially"
            )
        if self.search.range_epsilon is not None:
            what += f"; the feature ranges every candidate scaled with (epsilon {self.search.range_epsilon:g} alone)"
            how = how.replace("the releases'", "the releases' and the ranges'")
        whole = (
            f"what is published ({what}) depends on all {count} candidate releases of the same data"
            + ("" if sel is None else " and on the held-out records")
            + f": it is certified at epsilon {self.search_epsilon:.4g} ({how})"
        )
        if self.search.budget_covers == "search":
            return (
                f"{whole}, within the target {self.search.target_epsilon:g}: each candidate was calibrated to its "
                f"share; the chosen release alone is certified at {self.chosen.certified_epsilon:.4g} ({ACCOUNTANT})"
            )
        return (
            f"{whole}. The chosen release alone is certified at {self.chosen.certified_epsilon:.4g} ({ACCOUNTANT}), "
            "a bound for what is published only if the choice is made without the private data (e.g. on public data)"
        )

    def selection_note(self) -> str:
        """How the chosen trial was chosen, in one sentence (the CLI and the JSON)."""
        closed = " (closed form: no finalist round)" if self.search.model in CLOSED_FORM_MODELS else ""
        among = (
            "the finalists" if self.search.has_finalist_round else f"the candidates{closed or ' (no finalist round)'}"
        )
        if self.search.selection == "private":
            picks = " then ".join(p.describe() for p in self.picks)
            return (
                f"the most correct on the even rows of the held-out test split (real records, never mixed) among "
                f"{among}, chosen privately ({picks}); the test accuracy is on the odd rows, which nothing read "
                "before; the other candidates' scores stay private"
            )
        pooled = (
            f"the pooled held-out points of all {len(self.pooled_sources)} candidate releases "
            f"({sum(n for _, n in self.pooled_sources)} points, labels = argmax of the noisy labels)"
        )
        criterion = (
            f"highest accuracy on {pooled}"
            if self.search.selection == "pooled"
            else "highest validation accuracy on each release's own held-out points"
        )
        return f"{criterion} among {among}; the test accuracy was computed for the chosen release only after the choice"

    def to_dict(self) -> dict:
        """JSON-ready (the search settings, every trial, the choice and its test accuracy)."""
        search = asdict(self.search)
        search.pop("data_dir")
        search.pop("device")
        return {
            "search": search,
            "accountant": ACCOUNTANT,
            "chosen": self.chosen.to_dict(),
            "chosen_test_accuracy": self.test_accuracy,
            "chosen_test_rows": self.test_rows,
            "chosen_warning": self.warning,
            "chosen_epsilons": self.epsilons,
            "search_epsilon": self.search_epsilon,
            "search_epsilon_note": self.privacy_note(),
            "release_epsilon": self.search_epsilon if self.release_epsilon is None else self.release_epsilon,
            "selection_epsilon": self.search.selection_epsilon,
            "private_picks": [asdict(p) for p in self.picks],
            "pooled_validation": [{**asdict(c), "points": n} for c, n in self.pooled_sources],
            "selection": self.selection_note(),
            "trials": [t.to_dict() for t in self.trials],
            "seconds": self.seconds,
        }


def chosen_release(best: BestRelease):
    """The chosen candidate's release (a :class:`~dpmix_core.synthesis.pipeline.Synthesis`), made again exactly as
    its run made it (:func:`~dpmix_core.experiments.runner.run_release`: the same data, seed and sigmas, so the
    same points, already counted in the search's epsilon)."""
    from dpmix_core.experiments.runner import run_release

    t = best.chosen
    return run_release(candidate_run(best.search, t.candidate, epochs=t.epochs, sigma_x=t.sigma_x, sigma_y=t.sigma_y))


def chosen_card(best: BestRelease, synthesis) -> dict:
    """The chosen release's privacy card, saying that it was chosen by a search and what covers that: a ``search``
    section (candidates, the epsilon of everything published, how it composes, how it was chosen) and, first among
    the caveats, that the card's epsilons are this release's alone. On one's own file it names the held-out
    records (:func:`~dpmix_core.experiments.release_files.with_held_out`), so ``train --release`` scores on them."""
    from dpmix_core.experiments.release_files import own_held_out, with_held_out
    from dpmix_core.experiments.run_data import open_data_file
    from dpmix_core.synthesis.export import privacy_card

    card = privacy_card(synthesis)
    search = best.search
    card["search"] = {
        "candidates": len({t.candidate for t in best.trials}),
        "search_epsilon": best.search_epsilon,
        "delta": search.delta,
        "privacy": best.privacy_note(),
        "selection": best.selection_note(),
    }
    card["caveats"] = [
        f"This release was chosen by best-release among {card['search']['candidates']} candidate releases of the "
        f"same data: what is published (this release and the fact that it was chosen) is certified at epsilon "
        f"{best.search_epsilon:.4g} (delta {search.delta:g}); the epsilons above are this release's alone.",
        *card["caveats"],
    ]
    if search.own_data:
        assert search.data_file is not None
        own = open_data_file(
            search.data_file,
            label_column=search.label_column,
            test_fraction=search.test_fraction,
            categories=search.categories,
        )
        card = with_held_out(card, own_held_out(own))
    return card


def calibrated_sigmas(
    search: BestReleaseSearch,
    candidate: Candidate,
    dataset,
    *,
    target_epsilon: float | None = None,
    accountant: str = ACCOUNTANT,
) -> tuple[float, float, float, Any]:
    """The candidate's release calibrated to a per-candidate target.

    Args:
        search: the search (delta, and the target when ``target_epsilon`` is None).
        candidate: the (m, T, lambda) to calibrate.
        dataset: the training records (their count sets the Poisson rate m/n).
        target_epsilon: the candidate's own target (default: the search's).
        accountant: the calibrating accountant (``pld-poisson``; ``rdp-poisson`` when the candidates share a
            budget composed in RDP, see :func:`split_budget`).

    Returns:
        (sigma_x, sigma_y, the ``pld-poisson`` epsilon at those sigmas (a rigorous bound <= the target), the
        calibrated MixingRelease).
    """
    from dpmix_core.privacy.accountants import get_accountant  # lazy: dp_accounting and scipy

    target = search.target_epsilon if target_epsilon is None else target_epsilon
    calibrated, epsilon = _calibrate(_planned(search, candidate, dataset), candidate, search.delta, target, accountant)
    certified = epsilon
    if accountant != ACCOUNTANT:
        certified = float(get_accountant(ACCOUNTANT).epsilon(calibrated, search.delta).epsilon)
    return calibrated.sigma_x, calibrated.sigma_y, certified, calibrated


def _calibrate(release, candidate: Candidate, delta: float, target: float, accountant: str) -> tuple[Any, float]:
    """(the release with sigma calibrated to ``target`` by ``accountant``, that accountant's epsilon there)."""
    from dpmix_core.privacy.accountants import get_accountant
    from dpmix_core.privacy.calibration import REPRODUCIBLE, calibrate_sigma

    cal = calibrate_sigma(
        get_accountant(accountant),
        release,
        target_epsilon=target,
        delta=delta,
        sigma_ratio=candidate.sigma_ratio,
        time_budget=REPRODUCIBLE,
    )
    return release.with_sigma(cal.sigma_x, cal.sigma_y), float(cal.result.epsilon)


def _planned(search: BestReleaseSearch, candidate: Candidate, dataset):
    from dpmix_core.synthesis.pipeline import planned_release

    syn = candidate_run(search, candidate, epochs=search.short_epochs).synthesis
    if syn is None:  # pragma: no cover - a mixing run always has one
        raise ValueError("a feature-mixing candidate needs a synthesis config.")
    return planned_release(syn, dataset)


def split_budget(search: BestReleaseSearch, candidates: Iterable[Candidate], dataset) -> float:
    """The largest per-candidate epsilon t whose candidates, each calibrated to t, compose within the target (less
    a private choice's ``selection_epsilon``: :attr:`BestReleaseSearch.release_budget`).

    Everything published (the chosen release and the choice) is a function of every candidate release, so
    the search's target must bound their composition (:func:`composed_epsilon`, RDP). Each candidate is
    calibrated with ``rdp-poisson`` at t (composition is additive in RDP, so the same analysis certifies the
    whole); t is found to 1 %, keeping the feasible end, by :func:`largest_feasible` (each step calibrates
    every candidate, so steps are what it saves).

    Returns:
        t (<= the target; the target itself for one candidate). ValueError when no t > 1e-6 fits.
    """
    chosen = list(candidates)
    target = search.release_budget  # the target, less a private choice's share
    ranges = search.ranges_events()  # private ranges: one more release in the composition
    if len(chosen) <= 1 and not ranges:
        return target
    releases = {c: _planned(search, c, dataset) for c in chosen}

    def composed_at(t: float) -> float:
        calibrated = [_calibrate(r, c, search.delta, t, "rdp-poisson")[0] for c, r in releases.items()]
        return composed_epsilon(calibrated, search.delta, also=ranges)

    lo = target / len(chosen)
    at_lo = composed_at(lo)
    while at_lo > target:
        lo /= 2
        if lo < 1e-6:
            raise ValueError(f"no per-candidate epsilon lets {len(chosen)} candidates compose within {target:g}.")
        at_lo = composed_at(lo)
    return largest_feasible(composed_at, target, lo, at_lo, target, composed_at(target))


def largest_feasible(
    f: Callable[[float], float], target: float, lo: float, f_lo: float, hi: float, f_hi: float, rtol: float = 0.01
) -> float:
    """The largest t in [lo, hi] with f(t) <= target, to a factor 1 + rtol, for f increasing and positive.

    Illinois regula falsi on log f against log t (a composed epsilon is close to a power of the share, so a
    secant step lands near the root), with a bisection step whenever a step leaves the bracket wider than
    half: 4-6 evaluations where bisection on log t needs 8. Needs f(lo) <= target < f(hi); returns the
    feasible end.
    """
    if not (0 < lo < hi and f_lo <= target < f_hi):
        raise ValueError(
            f"largest_feasible needs f(lo) <= target < f(hi). Found f({lo:g}) = {f_lo:g}, f({hi:g}) = {f_hi:g}."
        )
    log_target = math.log(target)

    def probe(t: float) -> tuple[bool, float]:  # feasibility is read off f(t), never off its rounded log
        value = f(t)
        return value <= target, math.log(value) - log_target

    g_lo, g_hi = min(math.log(f_lo) - log_target, 0.0), math.log(f_hi) - log_target
    side = 0  # which end moved last (-1 lo, +1 hi): the other end's value is halved when it stays (Illinois)
    while hi / lo > 1 + rtol:
        a, b = math.log(lo), math.log(hi)
        width = b - a
        x = b - g_hi * width / (g_hi - g_lo) if g_hi != g_lo else (a + b) / 2
        t = math.exp(min(max(x, a + 0.01 * width), b - 0.01 * width))  # strictly inside
        feasible, g = probe(t)
        if feasible:
            if side == -1:
                g_hi /= 2
            lo, g_lo, side = t, min(g, 0.0), -1
        else:
            if side == 1:
                g_lo /= 2
            hi, g_hi, side = t, g, 1
        if math.log(hi / lo) > width / 2:  # slow progress: bisect once
            t = math.sqrt(lo * hi)
            feasible, g = probe(t)
            lo, g_lo, hi, g_hi = (t, min(g, 0.0), hi, g_hi) if feasible else (lo, g_lo, t, g)
            side = 0
    return lo


def composed_epsilon(releases: Iterable[Any], delta: float, *, also: Sequence[Any] = ()) -> float:
    """A rigorous epsilon of several releases of the same data together: RDP composition of their Poisson-subsampled
    Gaussian events (Mironov, Talwar, Zhang 2019; dp_accounting's RdpAccountant, add/remove adjacency), and of the
    dp_accounting events ``also`` (e.g. the private ranges every candidate scales with).

    The search reads every candidate's release; the choice, and so the chosen release *with* the fact that it was
    chosen, is a function of all of them: this is the epsilon that covers the search as a whole.
    """
    import dp_accounting  # lazy: the accountants' library
    from dp_accounting import rdp

    events = [r.dp_event() for r in releases] + list(also)
    if not events:
        raise ValueError("composition needs at least one release.")
    accountant = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))


def run_with_held_out(config: RunConfig) -> dict:
    """``runner.run_config`` in this process, plus what the pooled validation needs (the search's default run).

    Adds "held_out": (points, noisy labels) the run held out of its release, and "predict": its model as a
    function points -> classes. Candidate runs share one input space (the release's features, no projection;
    :func:`candidate_run`): the held-out points are kept as released, and "predict" applies the run's own input
    normalisation (one's own file: standardised on the run's own training points), so any model can score any
    release's points. "test_correct": whether the model classifies each row of the test split correctly (what a
    private choice reads on the even rows, and reports on the odd ones), with "test_labels". "release_collapse": why
    the model did not learn, read on the released held-out points and the training history only (None: it learned):
    the run's own "collapsed" also reads the test split, which the choice must not see.
    """
    from dpmix_core.experiments.runner import run_config

    keep: dict = {}
    result = run_config(config, keep=keep)
    if keep.get("model") is None:  # pragma: no cover - run_config always keeps its model
        return result
    classes = class_predictor(keep["model"], keep["device"])  # x_val and x_test are in the model's inputs already
    labels = np.asarray(keep["y_test"]).reshape(-1)
    return {
        **result,
        "held_out": (keep["x_val_raw"], keep["y_val"]),
        "predict": class_predictor(keep["model"], keep["device"], keep["input_map"]),
        "test_correct": classes(keep["x_test"]) == labels,
        "test_labels": labels,
        "release_collapse": release_collapse(result.get("history") or [], keep["y_val"], classes(keep["x_val"])),
    }


def release_collapse(history: list[dict], y_val: np.ndarray, predicted: np.ndarray) -> str | None:
    """Why a candidate's model did not learn, read on released data only (None: it learned): it predicts one class
    for nearly all of its release's held-out points, or its validation accuracy stayed at their majority rate while
    the training loss stayed flat (:func:`~dpmix_core.training.collapse.collapse_reason` without the test split).
    Labels of the held-out points: the argmax of their noisy labels."""
    from dpmix_core.training.collapse import collapse_reason, majority_rate

    return collapse_reason(
        history,
        val_majority=majority_rate(y_val),
        prediction_share=majority_rate(predicted),
        predicted_on="its release's held-out points",
    )


def chosen_collapse(correct: np.ndarray, labels: np.ndarray) -> str | None:
    """A sentence when the chosen model is no better than the majority class on the test rows it is reported on
    (``correct`` and ``labels`` of those rows: :func:`~dpmix_core.training.collapse.collapse_reason`'s chance line);
    None otherwise."""
    from dpmix_core.training.collapse import collapse_reason, majority_rate

    correct = np.asarray(correct, dtype=bool)
    if not len(correct):
        return None
    return collapse_reason(
        [],
        val_majority=None,
        prediction_share=None,
        test_accuracy=float(np.mean(correct)),
        test_majority=majority_rate(np.asarray(labels).reshape(-1)),
        test_rows=len(correct),
        cause="no candidate learned from this budget; try a larger target epsilon or fewer points T",
    )


def class_predictor(
    model, device, input_map: Callable[[np.ndarray], np.ndarray] | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """points (numpy rows, as released) -> predicted classes: argmax of
    :func:`~dpmix_core.training.train.predict`'s outputs on ``input_map(points)`` (the run's input normalisation;
    None: the points as they are)."""
    import torch

    from dpmix_core.training.train import predict

    def classes(x: np.ndarray) -> np.ndarray:
        x = x if input_map is None else input_map(x)
        rows = torch.as_tensor(np.ascontiguousarray(x), dtype=torch.float32).to(device)
        return predict(model, rows, batch_size=4096).argmax(dim=1).cpu().numpy() if len(x) else np.zeros(0, np.int64)

    return classes


_Probe = tuple[tuple[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _train_trial(
    search: BestReleaseSearch,
    candidate: Candidate,
    sigmas: tuple[float, float, float, Any],
    epochs: int,
    run: Callable[[RunConfig], dict],
) -> tuple[Trial, dict, _Probe | None]:
    """(the trial, the run's test accuracy and card epsilons, its held-out points and model or None).

    The second is held apart, read only for the chosen trial; the third feeds the pooled validation.
    """
    sx, sy, eps, _ = sigmas
    t0 = time.perf_counter()
    try:
        result = run(candidate_run(search, candidate, epochs=epochs, sigma_x=sx, sigma_y=sy))
    except LimitExceeded as exc:
        return Trial(candidate, epochs, sx, sy, eps, None, time.perf_counter() - t0, error=str(exc)), {}, None
    probe = (result["held_out"], result["predict"]) if "held_out" in result and "predict" in result else None
    trial = Trial(
        candidate,
        epochs,
        sx,
        sy,
        eps,
        result.get("val_accuracy"),
        float(result.get("seconds") or time.perf_counter() - t0),
        collapsed=(
            result["release_collapse"] is not None if "release_collapse" in result else bool(result.get("collapsed"))
        ),
    )
    after_choice = {
        "test_accuracy": result.get("test_accuracy"),
        "epsilon": dict(result.get("epsilon") or {}),
        "test_correct": result.get("test_correct"),
        "test_labels": result.get("test_labels"),
        "collapsed": bool(result.get("collapsed")),
    }
    return trial, after_choice, probe


def run_search(
    search: BestReleaseSearch,
    *,
    run: Callable[[RunConfig], dict] | None = None,
    progress: Callable[[str], None] | None = None,
    limits: Limits | None = None,
) -> BestRelease:
    """Calibrate every candidate, train all briefly, the finalists longer; choose on the selection's score.

    Every trained model is scored on the pooled held-out points of all first-round releases (one set for
    all, built once the first round is done; finalists retrain on the same releases and splits) and on its
    own release's held-out points; ``search.selection`` says which ranks.

    Args:
        run: trains one RunConfig and returns its result (default: :func:`run_with_held_out`); injectable for
            tests. For the pooled score its result carries "held_out" (points, noisy labels) and "predict"
            (points -> classes); without them a trial has no pooled score.
        progress: called with one line per step.
        limits: resource limits (default: the environment's).

    Returns:
        The :class:`BestRelease`. Raises ValueError (one line) when the search is refused up front or
        no candidate could be certified, trained and scored.
    """
    from dpmix_core.training.data import subsample

    if refusal := search_refusal(search, limits):
        raise LimitExceeded(refusal)
    train: Callable[[RunConfig], dict] = run or run_with_held_out
    say = progress or (lambda line: None)
    t_start = time.perf_counter()
    ds = load_run_dataset(candidate_run(search, search.space.candidates()[0], epochs=1))  # a file: its split
    train_only = replace(subsample(ds, train_limit=search.train_limit, test_limit=None), x_test=None, y_test=None)
    trials: list[Trial] = []
    sigmas: dict[Candidate, tuple[float, float, float, Any]] = {}
    per_candidate, accountant = search.target_epsilon, ACCOUNTANT
    if search.budget_covers == "search":
        per_candidate, accountant = split_budget(search, search.space.candidates(), train_only), "rdp-poisson"
        say(f"budget split: each of {len(search.space.candidates())} candidates at epsilon {per_candidate:.4g}")
    for candidate in search.space.candidates():
        try:
            sigmas[candidate] = calibrated_sigmas(
                search, candidate, train_only, target_epsilon=per_candidate, accountant=accountant
            )
        except ValueError as exc:  # e.g. a target no sigma reaches for this setting
            trials.append(Trial(candidate, 0, None, None, None, None, 0.0, error=str(exc)))
            say(f"{candidate.describe()}: not calibrated ({exc})")
    held_out: dict[tuple[Candidate, int], dict] = {}  # test accuracies: never read before the choice
    points: dict[Candidate, tuple[np.ndarray, np.ndarray]] = {}  # each release's held-out points, for the pool
    pool: PooledValidation | None = None  # built once from the first round (finalists reuse their releases)

    def train_round(candidates: list[Candidate], epochs: int, name: str) -> tuple[list[Trial], dict]:
        done, predictors = [], {}
        for i, candidate in enumerate(candidates, 1):
            trial, after_choice, probe = _train_trial(search, candidate, sigmas[candidate], epochs, train)
            held_out[(candidate, epochs)] = after_choice
            if probe is not None:
                if pool is None:  # later rounds retrain on the same releases and splits: already pooled
                    points[candidate] = probe[0]
                predictors[candidate] = probe[1]
            done.append(trial)
            score = "no score" if trial.val_accuracy is None else f"own validation accuracy {trial.val_accuracy:.4f}"
            say(
                f"{name} {i}/{len(candidates)}: {candidate.describe()}, sigma_x={trial.sigma_x:.4g}, "
                f"{search.training_length(epochs)}: {score}{' (collapsed)' if trial.collapsed else ''} ({trial.seconds:.0f} s)"
            )
        return done, predictors

    def scored(done: list[Trial], predictors: dict, name: str) -> list[Trial]:
        """The round's trials with their pooled accuracy (the models are dropped after scoring)."""
        if pool is None:
            return done
        out = []
        for t in done:
            if t.candidate in predictors and t.error is None:
                t = replace(t, pooled_accuracy=pooled_accuracy(predictors.pop(t.candidate), pool))
                say(f"{name}: {t.candidate.describe()}: pooled validation accuracy {t.pooled_accuracy:.4f}")
            out.append(t)
        return out

    first, predictors = train_round(list(sigmas), search.first_round_epochs, "round 1")
    pool = pool_held_out(points.items()) if points else None
    points.clear()  # the pool holds a copy
    if pool is not None:
        say(f"pooled validation set: {len(pool.x)} held-out points of {len(pool.sources)} releases")
    elif search.selection == "pooled":
        raise ValueError(
            "selection 'pooled' needs the runs' held-out points and models (run results with 'held_out' and "
            "'predict'); none came back: use selection 'own'."
        )
    first = scored(first, predictors, "round 1")
    trials.extend(first)
    eligible = certified_trials(first, target_epsilon=per_candidate)
    private = search.selection == "private"
    if private:
        for t in eligible:
            if held_out[(t.candidate, t.epochs)].get("test_correct") is None:
                raise ValueError(
                    "selection 'private' needs each run's predictions on the test rows (run results with "
                    "'test_correct'); none came back: use selection 'pooled' or 'own'."
                )
        ranked = eligible
    else:
        ranked = rank_trials(first, target_epsilon=per_candidate, selection=search.criterion)
    if not ranked:
        raise ValueError(
            f"no candidate was certified at the target, learned and was scored: {why_none(first, own_data=search.own_data)}."
        )
    picks = search.selection_picks(len(ranked)) if private else ()
    noise = [np.random.SeedSequence(search.seed, spawn_key=(_SELECTION_STREAM, i)) for i in range(len(picks))]
    if private:
        ranked = private_choice(ranked, [_correct(held_out, t) for t in ranked], picks[0], noise[0])
        say(f"private choice: {picks[0].describe()}")
    if search.has_finalist_round:
        finalists = [t.candidate for t in ranked[: search.finalist_count]]
        final, predictors = train_round(finalists, search.long_epochs, "finalists")
        final = scored(final, predictors, "finalists")
        trials.extend(final)
        if private:
            # the finalists' own trials where they learned, else their first-round ones: one pick either way
            done = {t.candidate: t for t in certified_trials(final, target_epsilon=per_candidate)}
            pool_final = [done.get(t.candidate, t) for t in ranked[: len(finalists)]]
            ranked = private_choice(pool_final, [_correct(held_out, t) for t in pool_final], picks[1], noise[1])
            say(f"private choice: {picks[1].describe()}")
        else:
            ranked = rank_trials(final, target_epsilon=per_candidate, selection=search.criterion) or ranked
    chosen = ranked[0]
    after_choice = held_out[(chosen.candidate, chosen.epochs)]  # read only now, for the chosen trial
    say(
        f"chosen: {chosen.candidate.describe()} ({search.training_length(chosen.epochs)}, "
        f"by {search.selection} {'choice on the even test rows' if private else 'validation accuracy'})"
    )
    warning = None
    if private:
        test_accuracy = odd_row_accuracy(after_choice["test_correct"])
        if after_choice.get("test_labels") is not None:
            rows = np.asarray(after_choice["test_labels"]).reshape(-1)[1::2]
            warning = chosen_collapse(np.asarray(after_choice["test_correct"], dtype=bool)[1::2], rows)
    elif after_choice.get("test_accuracy") is None:
        raise ValueError("the chosen run reported no test accuracy.")
    else:
        test_accuracy = float(after_choice["test_accuracy"])
        if after_choice.get("collapsed"):
            warning = "the chosen model is no better than the constant predictor on the test split (its run says so)"
    if warning:
        say(f"warning: {warning}")
    release_epsilon = composed_epsilon([cal[3] for cal in sigmas.values()], search.delta, also=search.ranges_events())
    return BestRelease(
        search,
        tuple(trials),
        chosen,
        test_accuracy,
        after_choice["epsilon"],
        time.perf_counter() - t_start,
        release_epsilon + (search.selection_epsilon or 0.0),
        pool.sources if pool is not None else (),
        release_epsilon=release_epsilon,
        picks=picks,
        warning=warning,
    )


def why_none(trials: Sequence[Trial], *, own_data: bool = False) -> str:
    """Why no trial is eligible, in words: how many were not calibrated (the first reason), never learned, or
    have no score; with the usual cures (on one's own file also tighter public bounds: features squeezed into a
    sliver of [0, 1] drown in noise calibrated to the whole width)."""
    errors = [t for t in trials if t.error is not None]
    collapsed = [t for t in trials if t.error is None and t.collapsed]
    parts = []
    if errors:
        parts.append(f"{len(errors)} of {len(trials)} not calibrated or not run ({errors[0].error})")
    if collapsed:
        parts.append(
            f"{len(collapsed)} of {len(trials)} never left the constant predictor (too much noise per point for "
            "this many records: a larger target epsilon, fewer points T or a larger m"
            + (", or public bounds closer to where your features lie)" if own_data else ")")
        )
    if len(errors) + len(collapsed) < len(trials):
        parts.append(f"{len(trials) - len(errors) - len(collapsed)} of {len(trials)} have no score")
    return "; ".join(parts) or "no candidate was trained"


def _correct(held_out: dict, trial: Trial) -> np.ndarray:
    """The trial's correct / wrong on each test row (held apart from the trial; read by a private choice only)."""
    return np.asarray(held_out[(trial.candidate, trial.epochs)]["test_correct"], dtype=bool)
