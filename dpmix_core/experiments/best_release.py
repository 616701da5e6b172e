"""Best feature-mixing release for a privacy budget: search m, T and lambda on a pooled validation set of the releases.

Issue #13 §5. For a target (epsilon, delta), every candidate (m, T, lambda = sigma_y / sigma_x) of the
DPFMix feature-mixing release (ScatterNet features, per-sample GroupNorm, Poisson mixing, clip Cx = Cy = 1)
gets sigma_x calibrated to its share of the budget (see "The search's own privacy" below).
Candidates are scored on held-out parts of the *synthetic releases*, never on real test records, with
successive halving: a short training for all of them, a longer one for the best few (the finalists); the
winner is the finalist with the best score.

Two scores per trial (both on released points only):

* ``pooled_accuracy`` (the criterion by default, ``selection="pooled"``): every candidate's release holds out
  ``val_fraction`` of its points (its run's validation split, never trained on); their union is *one* pooled
  set (:func:`pool_held_out`, labels = argmax of the noisy labels) on which every candidate's model is scored.
  Same points, same labels for every candidate, so the scores compare models, not splits.
* ``val_accuracy`` (``selection="own"``, the earlier criterion, still reported): accuracy on the candidate's own
  held-out points. Those splits differ between candidates (other T, other noise per point), so it is
  biased towards less noise per point (smaller T, smaller lambda): on MNIST at epsilon = 1 it preferred
  T = 10000 while T = 30000 scored higher on the test set.

The test set: every training run goes through :func:`~dpmix_core.experiments.runner.run_config`, which
also evaluates on the real test split. Those numbers never reach the choice: a :class:`Trial` holds no
test accuracy, selection (:func:`rank_trials`) sees only trials, and the winner's test accuracy is read
after the choice and reported apart from it. Test accuracies of the other candidates are not kept.

Cost: the number of runs (candidates + finalists) and their estimated time are checked before any work
(:func:`search_refusal`), against the caller's budget and :mod:`dpmix_core.resources.limits`.

Two things a reader of the result must know (docs/REPRODUCTION.md, "§5 best release"):

* **The search's own privacy.** Every candidate is a release of the same data and the choice reads all of
  them, so what is published (the chosen release *and* the fact that it was chosen) is bounded by
  :func:`composed_epsilon` of every candidate release. By default (``budget_covers="search"``) the target
  bounds that: the candidates share it (:func:`split_budget`). With ``budget_covers="release"`` each
  candidate is certified at the target alone and the larger composed epsilon is reported beside it.
  Finalists retrain on the same release (same seed): no extra cost.
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
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from dpmix_core.data import DATASET_NAMES
from dpmix_core.experiments.config import RunConfig
from dpmix_core.experiments.presets import SPLIT_SIZES, estimate_seconds
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
]

BUDGET_COVERS = ("search", "release")
SELECTIONS = ("pooled", "own")  # the pooled held-out points of every release (default), or each release's own
ACCOUNTANT = "pld-poisson"  # the exact PLD: every candidate is certified by a rigorous bound, not the CLT
_PAPER_MILESTONES = (0.4, 0.6, 0.8)  # DPFMix App. E.3: lr / 10 at epochs 80, 120, 160 of 200
SCATTER_CHANNELS = 81  # ScatterNet J=2, L=8 channels per colour channel, at 1/4 resolution


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
        selection: "pooled" (default): finalists ranked by accuracy on the pooled held-out points of every
            candidate release; "own": by accuracy on each release's own held-out points (the earlier criterion).
        budget_covers: "search" (default): the target bounds what is published, the chosen release *and* the
            choice, so the candidates share it (:func:`split_budget`); "release": every candidate is calibrated
            to the target by itself, and the search's composed epsilon (larger) is reported beside it.
        model: the classifier every candidate trains: "scatter-linear" (DPFMix's linear layer, default),
            "scatter-cnn" (Tramer & Boneh's small CNN on the same features), "linear", or "corrected-lsq" (least
            squares in closed form, corrected for each release's noise: no epochs, so no finalist round). Same
            protocol for all.
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
    selection: str = "pooled"  # "pooled": one held-out set for every candidate; "own": each release's own split
    model: str = "scatter-linear"

    def __post_init__(self) -> None:
        if not (isinstance(self.target_epsilon, (int, float)) and 0 < self.target_epsilon < math.inf):
            raise ValueError(f"target epsilon must be a positive finite number. Found {self.target_epsilon!r}.")
        if not (isinstance(self.delta, (int, float)) and 0 < self.delta < 1):
            raise ValueError(f"delta must be in (0, 1). Found {self.delta!r}.")
        if self.dataset not in DATASET_NAMES:
            raise ValueError(f"Unknown dataset {self.dataset!r}. Choose one of: {', '.join(DATASET_NAMES)}.")
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
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}. Found {self.selection!r}.")
        for name in ("train_limit", "test_limit"):
            value = getattr(self, name)
            if value is not None:
                _positive_ints(name, (value,))
        object.__setattr__(self, "target_epsilon", float(self.target_epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        object.__setattr__(self, "max_seconds", float(self.max_seconds))
        object.__setattr__(self, "val_fraction", float(self.val_fraction))
        candidate_run(self, self.space.candidates()[0], epochs=self.short_epochs)  # seed, device: RunConfig's checks

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
    feature-mixing release.

    With ``sigma_x``/``sigma_y`` (already calibrated) the release uses them; without, it calibrates to the target.
    """
    calibrated = sigma_x is not None and sigma_y is not None
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
        features="scattering",
    )
    milestones = scaled_milestones(epochs)
    return RunConfig(
        "mixing",
        dataset=search.dataset,
        features="scattering",
        synthesis=synthesis,
        model=search.model,
        loss="gkl",
        optimizer="adam",
        lr=1e-3,
        schedule="multistep" if milestones else "constant",
        lr_milestones=milestones,
        lr_gamma=0.1,
        epochs=epochs,
        batch_size=256,
        val_fraction=search.val_fraction,
        train_limit=search.train_limit,
        test_limit=search.test_limit,
        seed=search.seed,
        label=f"best-release {candidate.describe()}",
        device=search.device,
        data_dir=search.data_dir,
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
    n_train = SPLIT_SIZES[search.dataset][0]
    n = min(n_train, search.train_limit) if search.train_limit is not None else n_train
    release = mixing_cost(T=biggest.T, l=biggest.m, d=_feature_dim(search.dataset), k=10, n=n)
    pooled = float(pooled_size(search)) * (_feature_dim(search.dataset) + 10) * BYTES_PER_VALUE
    return Cost(
        what=f"a search of {planned_runs(search)} training runs", memory=release.memory + pooled, seconds=seconds
    )


def pooled_size(search: BestReleaseSearch) -> int:
    """Points in the pooled validation set: round(val_fraction * T) of every candidate (held until the end)."""
    return sum(round(search.val_fraction * c.T) for c in search.space.candidates())


def search_refusal(search: BestReleaseSearch, limits: Limits | None = None) -> str | None:
    """Why the search would be refused before any work (one line), or None.

    Refused when it needs more runs than ``search.max_runs``, more estimated seconds than
    ``search.max_seconds``, or more memory / job time than ``limits`` (default: the environment's).
    """
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
        """The trial's score under ``selection``: pooled_accuracy ("pooled") or val_accuracy ("own")."""
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}. Found {selection!r}.")
        return self.pooled_accuracy if selection == "pooled" else self.val_accuracy

    @property
    def eligible(self) -> bool:
        """Scored, learned, and certified (the certificate is checked against the target by :func:`rank_trials`)."""
        return self.error is None and self.val_accuracy is not None and not self.collapsed

    def to_dict(self) -> dict:
        return asdict(self)


def rank_trials(trials: Iterable[Trial], *, target_epsilon: float, selection: str = "pooled") -> list[Trial]:
    """The eligible trials certified within ``target_epsilon`` and scored, best score first.

    ``selection``: "pooled" ranks by :attr:`Trial.pooled_accuracy`, "own" by :attr:`Trial.val_accuracy`.
    Ties keep the cheaper release (smaller T, then smaller m), then the grid order. Trials only: the
    choice cannot see any test accuracy.
    """
    ok = [
        t
        for t in trials
        if t.eligible
        and t.score(selection) is not None
        and t.certified_epsilon is not None
        and t.certified_epsilon <= target_epsilon * (1 + 1e-9)
    ]
    return sorted(ok, key=lambda t: (-(t.score(selection) or 0.0), t.candidate.T, t.candidate.m))


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
    search_epsilon: float  # every candidate release composed (rdp-poisson): covers the search and its choice
    pooled_sources: tuple[tuple[Candidate, int], ...] = ()  # the pooled validation set: (candidate, points)

    def privacy_note(self) -> str:
        """What the published result's epsilon is, in one sentence for the card, the CLI and the JSON."""
        count = len({t.candidate for t in self.trials if t.sigma_x is not None})
        whole = (
            f"what is published (the chosen release and the choice) depends on all {count} candidate releases of "
            f"the same data: it is certified at epsilon {self.search_epsilon:.4g} (rigorous, rdp-poisson "
            f"composition, delta {self.search.delta:g})"
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
        pooled = (
            f"the pooled held-out points of all {len(self.pooled_sources)} candidate releases "
            f"({sum(n for _, n in self.pooled_sources)} points, labels = argmax of the noisy labels)"
        )
        criterion = (
            f"highest accuracy on {pooled}"
            if self.search.selection == "pooled"
            else "highest validation accuracy on each release's own held-out points"
        )
        among = "the finalists" if self.search.finalist_count else "the candidates (closed form: no finalist round)"
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
            "chosen_epsilons": self.epsilons,
            "search_epsilon": self.search_epsilon,
            "search_epsilon_note": self.privacy_note(),
            "pooled_validation": [{**asdict(c), "points": n} for c, n in self.pooled_sources],
            "selection": self.selection_note(),
            "trials": [t.to_dict() for t in self.trials],
            "seconds": self.seconds,
        }


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
    """The largest per-candidate epsilon t whose candidates, each calibrated to t, compose within the target.

    Everything published (the chosen release and the choice) is a function of every candidate release, so
    the search's target must bound their composition (:func:`composed_epsilon`, RDP). Each candidate is
    calibrated with ``rdp-poisson`` at t (composition is additive in RDP, so the same analysis certifies the
    whole); t is found to 1 %, keeping the feasible end, by :func:`largest_feasible` (each step calibrates
    every candidate, so steps are what it saves).

    Returns:
        t (<= the target; the target itself for one candidate). ValueError when no t > 1e-6 fits.
    """
    chosen = list(candidates)
    target = search.target_epsilon
    if len(chosen) <= 1:
        return target
    releases = {c: _planned(search, c, dataset) for c in chosen}

    def composed_at(t: float) -> float:
        calibrated = [_calibrate(r, c, search.delta, t, "rdp-poisson")[0] for c, r in releases.items()]
        return composed_epsilon(calibrated, search.delta)

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


def composed_epsilon(releases: Iterable[Any], delta: float) -> float:
    """A rigorous epsilon of several releases of the same data together: RDP composition of their Poisson-subsampled
    Gaussian events (Mironov, Talwar, Zhang 2019; dp_accounting's RdpAccountant, add/remove adjacency).

    The search reads every candidate's release; the choice, and so the chosen release *with* the fact that it was
    chosen, is a function of all of them: this is the epsilon that covers the search as a whole.
    """
    import dp_accounting  # lazy: the accountants' library
    from dp_accounting import rdp

    events = [r.dp_event() for r in releases]
    if not events:
        raise ValueError("composition needs at least one release.")
    accountant = rdp.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))


def run_with_held_out(config: RunConfig) -> dict:
    """``runner.run_config`` in this process, plus what the pooled validation needs (the search's default run).

    Adds "held_out": (points, noisy labels) the run held out of its release, and "predict": its model as a
    function points -> classes. Candidate runs share one input space (the release's features, no projection,
    no input scaling: :func:`candidate_run`), so any model can score any release's points.
    """
    from dpmix_core.experiments.runner import run_config

    keep: dict = {}
    result = run_config(config, keep=keep)
    if keep.get("model") is None:  # pragma: no cover - run_config always keeps its model
        return result
    return {
        **result,
        "held_out": (keep["x_val"], keep["y_val"]),
        "predict": class_predictor(keep["model"], keep["device"]),
    }


def class_predictor(model, device) -> Callable[[np.ndarray], np.ndarray]:
    """points (numpy rows) -> predicted classes: argmax of :func:`~dpmix_core.training.train.predict`'s outputs."""
    import torch

    from dpmix_core.training.train import predict

    def classes(x: np.ndarray) -> np.ndarray:
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
        collapsed=bool(result.get("collapsed")),
    )
    return trial, {"test_accuracy": result.get("test_accuracy"), "epsilon": dict(result.get("epsilon") or {})}, probe


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
    from dpmix_core.data import load_dataset
    from dpmix_core.training.data import subsample

    if refusal := search_refusal(search, limits):
        raise LimitExceeded(refusal)
    train: Callable[[RunConfig], dict] = run or run_with_held_out
    say = progress or (lambda line: None)
    t_start = time.perf_counter()
    ds = load_dataset(search.dataset, data_dir=search.data_dir)
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
    ranked = rank_trials(first, target_epsilon=per_candidate, selection=search.selection)
    if not ranked:
        raise ValueError("no candidate was certified at the target, learned and was scored; see the trials' errors.")
    finalists = [t.candidate for t in ranked[: search.finalist_count]]
    if search.long_epochs > search.short_epochs:
        final, predictors = train_round(finalists, search.long_epochs, "finalists")
        final = scored(final, predictors, "finalists")
        trials.extend(final)
        ranked = rank_trials(final, target_epsilon=per_candidate, selection=search.selection) or ranked
    chosen = ranked[0]
    after_choice = held_out[(chosen.candidate, chosen.epochs)]  # read only now, for the chosen trial
    say(
        f"chosen: {chosen.candidate.describe()} ({search.training_length(chosen.epochs)}, "
        f"by {search.selection} validation accuracy)"
    )
    if after_choice.get("test_accuracy") is None:
        raise ValueError("the chosen run reported no test accuracy.")
    return BestRelease(
        search,
        tuple(trials),
        chosen,
        float(after_choice["test_accuracy"]),
        after_choice["epsilon"],
        time.perf_counter() - t_start,
        composed_epsilon([cal[3] for cal in sigmas.values()], search.delta),
        pool.sources if pool is not None else (),
    )
