"""Membership inference on a model trained from a release: the loss-threshold attack (Yeom et al. 2018).

The protocol (as DPFMix Table 4): draw ``members`` records from the private
training split; train a model either on those records themselves
("non-private") or on a mixing release made from them only ("mixing"); then
compare the model's cross-entropy loss (with the true label) on the members
against the loss on as many *non-members*, records from the same distribution
that neither the model nor the release saw (by default further records of the
training split; ``nonmembers="test"`` takes them from the test split).

The attack says "member" when the loss is below a threshold. Reported:

* AUC of that attack over all thresholds (0.5: no better than guessing), from
  ranks (Mann-Whitney), ties counted one half;
* advantage: max over thresholds of TPR - FPR (Yeom et al.'s membership advantage);
* train accuracy (on the members), test accuracy (on the non-members) and the gap.

Both are *empirical* lower-bound style evidence, not a privacy guarantee: a
small AUC does not prove privacy, a large one proves leakage. The epsilon
shown for a mixing run is the release's, from its applicable accountants, for
a release made from ``members`` records (so larger than for the full dataset).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpmix_core.data import Categories, Dataset, check_categories, json_categories
from dpmix_core.privacy.checks import (
    FeatureRange,
    check_feature_range,
    check_positive,
    describe_feature_range,
    json_feature_range,
)
from dpmix_core.synthesis.pipeline import SynthesisConfig

__all__ = [
    "SETTINGS",
    "NONMEMBER_SOURCES",
    "MembershipResult",
    "attack_auc",
    "attack_advantage",
    "default_configs",
    "format_epsilons",
    "membership_inference",
    "membership_table",
]

SETTINGS = ("non-private", "mixing")
NONMEMBER_SOURCES = ("train", "test")
AUDIT_MODELS = ("linear", "thesis-cnn")


@dataclass(frozen=True)
class MembershipResult:
    """One membership-inference run. Losses are per-example cross-entropy with the true label."""

    setting: str
    model: str
    epochs: int
    member_losses: np.ndarray  # (m,)
    nonmember_losses: np.ndarray  # (m,)
    auc: float
    advantage: float
    threshold: float  # the loss threshold reaching ``advantage`` (member when loss <= threshold)
    train_accuracy: float  # on the members
    test_accuracy: float  # on the non-members
    epsilon: dict[str, float] = field(default_factory=dict)  # accountant -> epsilon (inf without noise)
    delta: float | None = None
    sigma_x: float | None = None
    sigma_y: float | None = None
    released_points: int | None = None
    synthesis: SynthesisConfig | None = None  # with the sigmas actually used
    nonmember_source: str = "train"
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def members(self) -> int:
        return int(self.member_losses.shape[0])

    @property
    def gap(self) -> float:
        """train accuracy - test accuracy (overfitting; > 0 means the model fits its members better)."""
        return self.train_accuracy - self.test_accuracy

    def epsilon_label(self) -> str:
        """e.g. 'inf (non-private)', 'inf (no noise)', '3.2 (rdp-wor), 4.9 (lee2019)'."""
        if self.setting == "non-private":
            return "inf (non-private)"
        return format_epsilons(self.epsilon)


def format_epsilons(epsilon: dict[str, float]) -> str:
    if not epsilon:
        return "n/a"
    values = list(epsilon.values())
    if all(math.isinf(v) for v in values):
        return "inf (no noise)" if values else "n/a"
    return ", ".join(f"{v:.3g} ({name})" for name, v in sorted(epsilon.items(), key=lambda kv: kv[1]))


# ---------------------------------------------------------------------------------------------- attack metrics


def _check_scores(members: np.ndarray, nonmembers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(members, dtype=np.float64).reshape(-1)
    b = np.asarray(nonmembers, dtype=np.float64).reshape(-1)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need at least one member and one non-member loss. Found {a.size} and {b.size}.")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("losses must be finite (no NaN or inf).")
    return a, b


def attack_auc(member_losses: np.ndarray, nonmember_losses: np.ndarray) -> float:
    """AUC of 'member when loss is low': P(loss_member < loss_nonmember) + P(equal) / 2, via average ranks."""
    a, b = _check_scores(member_losses, nonmember_losses)
    scores = -np.concatenate([a, b])  # higher score => member
    uniq, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    starts = np.cumsum(counts) - counts  # number of strictly smaller scores
    avg_rank = starts + (counts + 1) / 2.0  # 1-based average rank of each distinct value
    rank_sum = float(avg_rank[inverse[: a.size]].sum())
    return (rank_sum - a.size * (a.size + 1) / 2.0) / (a.size * b.size)


def attack_advantage(member_losses: np.ndarray, nonmember_losses: np.ndarray) -> tuple[float, float]:
    """(max over thresholds tau of TPR - FPR for 'member when loss <= tau', the best tau); 0 at tau = -inf."""
    a, b = _check_scores(member_losses, nonmember_losses)
    thresholds = np.unique(np.concatenate([a, b]))
    tpr = np.searchsorted(np.sort(a), thresholds, side="right") / a.size
    fpr = np.searchsorted(np.sort(b), thresholds, side="right") / b.size
    diff = tpr - fpr
    i = int(np.argmax(diff))
    if diff[i] <= 0:
        return 0.0, -math.inf
    return float(diff[i]), float(thresholds[i])


# ---------------------------------------------------------------------------------------------- the experiment


def _check_inputs(
    dataset: Dataset,
    setting: str,
    synthesis: SynthesisConfig | None,
    model: str,
    epochs: int,
    members: int,
    nonmembers: str,
    lr: float,
    batch_size: int,
) -> None:
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset must be a dpmix_core Dataset. Found {type(dataset).__name__}.")
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}. Found {setting!r}.")
    if setting == "mixing":
        if not isinstance(synthesis, SynthesisConfig):
            raise ValueError("setting 'mixing' needs a SynthesisConfig (synthesis=...).")
        if synthesis.mechanism == "label-laplace":
            raise ValueError(
                "label-laplace releases the real features unchanged: use a mixing mechanism "
                "(dpmix, class-centric, poisson, local)."
            )
        if synthesis.label_task != "classification":
            raise ValueError("membership inference here needs classification labels (label_task='classification').")
    elif synthesis is not None:
        raise ValueError("setting 'non-private' trains on the real members: pass synthesis=None.")
    if model not in AUDIT_MODELS:
        raise ValueError(f"model must be one of {', '.join(AUDIT_MODELS)}. Found {model!r}.")
    if model == "thesis-cnn" and len(dataset.x_train.shape) not in (3, 4):
        raise ValueError(f"thesis-cnn needs image records. Found records of shape {dataset.x_train.shape[1:]}.")
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer. Found {epochs!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer. Found {batch_size!r}.")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number. Found {lr!r}.")
    if nonmembers not in NONMEMBER_SOURCES:
        raise ValueError(f"nonmembers must be one of {', '.join(NONMEMBER_SOURCES)}. Found {nonmembers!r}.")
    if isinstance(members, bool) or not isinstance(members, (int, np.integer)) or members < 2:
        raise ValueError(f"members must be an integer >= 2. Found {members!r}.")
    n = dataset.n_train
    if nonmembers == "train":
        if 2 * members > n:
            raise ValueError(
                f"members={members} leaves too few training records for as many non-members: "
                f"need 2*members <= n_train={n} (or nonmembers='test')."
            )
    else:
        if members > n:
            raise ValueError(f"members={members} exceeds the training records n_train={n}.")
        n_test = 0 if dataset.x_test is None else len(dataset.x_test)
        if members > n_test:
            raise ValueError(f"nonmembers='test' needs members <= test records ({n_test}). Found members={members}.")


def membership_inference(
    dataset: Dataset,
    *,
    setting: str,
    synthesis: SynthesisConfig | None = None,
    model: str = "linear",
    epochs: int = 10,
    members: int = 1000,
    nonmembers: str = "train",
    lr: float = 1e-3,
    batch_size: int = 128,
    seed: int = 0,
    feature_range: FeatureRange | None = None,
    standardize: bool = False,
) -> MembershipResult:
    """Train on ``members`` private records (or on a mixing release of them) and attack with the loss threshold.

    ``setting``: "non-private" (train on the real members, pixels/255 or float features scaled to [0,1] by the
    public ``feature_range`` as a release of them is (its synthesis holds the same bounds), one-hot labels) or
    "mixing" (``synthesize(synthesis, members-only dataset)``; the model trains on the release
    with the KL loss to its soft labels, and is attacked in the release's feature space).
    ``seed`` picks members / non-members, the model initialisation and the batch order; the
    release itself uses ``synthesis.seed``. Torch's global RNG is left as it was. ``standardize``: the model's
    inputs minus the training inputs' per-feature mean, over their standard deviation (post-processing of a
    release; what the own-data linear protocol does, :data:`~dpmix_core.training.protocols.OWN_DATA_LINEAR`).

    Args:
        dataset: the private dataset; members (and by default non-members) come from its training split.
        setting: "non-private" or "mixing" (see above).
        synthesis: the release's configuration for "mixing" (a mixing mechanism, classification labels; a
            target epsilon is calibrated for n = ``members``); None for "non-private".
        model: the attacked model: "linear" or "thesis-cnn" (image records only).
        epochs: training epochs (>= 1).
        members: m, the number of member records, and of non-members (>= 2).
        nonmembers: where the m non-members come from: "train" (other training records; needs 2m <= n_train)
            or "test" (the test split; needs m <= its size).
        lr: Adam learning rate (positive).
        batch_size: training batch size (>= 1).

    Returns:
        A :class:`MembershipResult`: per-record member and non-member losses (m,), the attack's AUC and
        advantage (fractions; 0.5 and 0 mean no better than guessing) with its loss threshold, train and test
        accuracy (fractions), and for "mixing" each applicable accountant's epsilon at ``synthesis.delta``,
        the sigmas used, the number of released points and the resolved configuration.

    Raises:
        ValueError: any argument out of range or inconsistent with the setting (each with one line saying
            which), not enough records for the members and non-members, or a release over the job limits
            (:class:`~dpmix_core.resources.limits.LimitExceeded`).
    """
    _check_inputs(dataset, setting, synthesis, model, epochs, members, nonmembers, lr, batch_size)
    import torch
    import torch.nn.functional as F

    from dpmix_core.training import data as D
    from dpmix_core.training.losses import get_loss
    from dpmix_core.training.models import build_model
    from dpmix_core.training.train import OptimSettings, fit, predict

    t_start = time.perf_counter()
    members = int(members)
    seeds = np.random.SeedSequence(int(seed)).generate_state(3)  # members/non-members, torch init, batch order
    rng = np.random.default_rng(int(seeds[0]))
    n = dataset.n_train
    perm = rng.permutation(n)
    mem_idx = np.sort(perm[:members])
    if nonmembers == "train":
        non_idx = np.sort(perm[members : 2 * members])
        x_non, y_non = dataset.x_train[non_idx], dataset.y_train[non_idx]
    else:
        if dataset.x_test is None or dataset.y_test is None:
            raise ValueError(f"non-members from the test split need a dataset with one ({dataset.name!r} has none).")
        non_idx = np.sort(rng.choice(len(dataset.x_test), size=members, replace=False))
        x_non, y_non = dataset.x_test[non_idx], dataset.y_test[non_idx]
    x_mem, y_mem = dataset.x_train[mem_idx], dataset.y_train[mem_idx]
    k = dataset.num_classes
    notes: list[str] = [
        f"members: {members} records drawn at random from the training split; non-members: {members} other "
        f"records of the {'training' if nonmembers == 'train' else 'test'} split, never seen by the model or release",
        "attack: loss threshold (Yeom et al. 2018), member when cross-entropy with the true label is low",
    ]

    epsilon: dict[str, float] = {}
    delta = sigma_x = sigma_y = released = None
    used_config = None
    if setting == "mixing":
        from dpmix_core.privacy.accountants import applicable_accountants
        from dpmix_core.privacy.release import MixingRelease
        from dpmix_core.synthesis.pipeline import synthesize

        member_ds = Dataset(
            f"{dataset.name}-members",
            x_mem,
            y_mem,
            None,
            None,
            k,
            f"{dataset.source} ({members} membership-audit members)",
            dataset.label_names,
        )
        if synthesis is None:
            raise ValueError("setting 'mixing' needs a synthesis config.")
        syn = synthesize(synthesis, member_ds, job=True)
        used_config = syn.config
        x_train, y_train = syn.data.x, syn.data.y
        feature_map = D.release_feature_map(syn.config, x_mem)
        release = syn.data.release
        if isinstance(release, MixingRelease):
            epsilon = {
                acc.name: float(acc.epsilon(release, syn.config.delta).epsilon)
                for acc in applicable_accountants(release)
            }
        delta, sigma_x, sigma_y = syn.config.delta, syn.config.sigma_x, syn.config.sigma_y
        released = int(x_train.shape[0])
        notes.append(
            f"model trained on {released} points released by {syn.config.mechanism} "
            f"(l={syn.config.l}, sigma_x={sigma_x:.4g}, sigma_y={sigma_y:.4g}) from the members only; "
            f"epsilon is that release's, for n={members}"
        )
        loss_name = "kl"
    else:
        feature_map = D.record_feature_map(feature_range)
        x_train, y_train = feature_map(x_mem), D.one_hot(y_mem, k)
        scaled = (
            "pixels/255"
            if feature_range is None
            else f"scaled to [0,1] by the public bounds {describe_feature_range(feature_range)}"
        )
        notes.append(f"non-private: model trained on the real members ({scaled})")
        loss_name = "ce"

    if standardize:
        to_inputs, record_map = D.standardizer(x_train), feature_map
        feature_map = lambda x: to_inputs(record_map(x))  # noqa: E731
        x_train = to_inputs(x_train)
        notes.append("inputs standardised with the training inputs' per-feature mean and standard deviation")
    to = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
    settings = OptimSettings(optimizer="adam", lr=float(lr), epochs=int(epochs), batch_size=int(batch_size))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seeds[1]))
        net = build_model(model, input_shape=tuple(dataset.x_train.shape[1:]), num_outputs=k)
        fit(
            net,
            get_loss(loss_name),
            to(x_train),
            to(y_train),
            settings=settings,
            generator=torch.Generator().manual_seed(int(seeds[2])),
        )

    def losses_and_acc(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        logits = predict(net, to(feature_map(x)))
        labels = torch.as_tensor(np.asarray(y, dtype=np.int64))
        loss = F.cross_entropy(logits, labels, reduction="none").double().numpy()
        acc = float((logits.argmax(dim=1) == labels).float().mean())
        return loss, acc

    mem_loss, train_acc = losses_and_acc(x_mem, y_mem)
    non_loss, test_acc = losses_and_acc(x_non, y_non)
    auc = attack_auc(mem_loss, non_loss)
    adv, thr = attack_advantage(mem_loss, non_loss)
    return MembershipResult(
        setting=setting,
        model=model,
        epochs=int(epochs),
        member_losses=mem_loss,
        nonmember_losses=non_loss,
        auc=auc,
        advantage=adv,
        threshold=thr,
        train_accuracy=train_acc,
        test_accuracy=test_acc,
        epsilon=epsilon,
        delta=delta,
        sigma_x=sigma_x,
        sigma_y=sigma_y,
        released_points=released,
        synthesis=used_config,
        nonmember_source=nonmembers,
        seconds=time.perf_counter() - t_start,
        notes=tuple(notes),
    )


def membership_table(
    dataset: Dataset,
    *,
    configs: list[tuple[str, str, SynthesisConfig | None]],
    **kwargs: Any,
):
    """One row per (label, setting, synthesis) with the attack's numbers, as a pandas DataFrame.

    Columns: label, setting, epsilon (e.g. '3.2 (rdp-wor), 5.4 (lee2019)'), epsilon_min (float, inf
    without noise), AUC, advantage, train acc, test acc, gap, seconds. ``kwargs`` go to
    :func:`membership_inference` (model, epochs, members, nonmembers, lr, batch_size, seed).
    """
    import pandas as pd

    if not configs:
        raise ValueError("configs must list at least one (label, setting, SynthesisConfig | None).")
    rows = []
    for entry in configs:
        if not (isinstance(entry, tuple) and len(entry) == 3):
            raise ValueError(f"each config must be a (label, setting, SynthesisConfig | None) tuple. Found {entry!r}.")
        label, setting, syn = entry
        res = membership_inference(dataset, setting=setting, synthesis=syn, **kwargs)
        rows.append(
            {
                "label": str(label),
                "setting": setting,
                "epsilon": res.epsilon_label(),
                "epsilon_min": min(res.epsilon.values()) if res.epsilon else math.inf,
                "AUC": res.auc,
                "advantage": res.advantage,
                "train acc": res.train_accuracy,
                "test acc": res.test_accuracy,
                "gap": res.gap,
                "seconds": res.seconds,
            }
        )
    return pd.DataFrame(rows)


def default_configs(
    *,
    l: int = 16,
    T: int = 2000,
    epsilons: tuple[float, ...] = (8.0, 1.0),
    accountant: str = "rdp-wor",
    seed: int = 0,
    feature_range: FeatureRange | None = None,
) -> list[tuple[str, str, SynthesisConfig | None]]:
    """The 'Table 4' rows: non-private, DPMix without noise, DPMix calibrated to each epsilon (float features
    scaled to [0,1] by the public ``feature_range``; pass the same to :func:`membership_inference`)."""
    dpmix: dict[str, Any] = dict(l=l, T=T, seed=seed, feature_range=feature_range)
    rows: list[tuple[str, str, SynthesisConfig | None]] = [
        ("non-private", "non-private", None),
        (f"DPMix l={l}, no noise", "mixing", SynthesisConfig("dpmix", sigma_x=0.0, sigma_y=0.0, **dpmix)),
    ]
    for eps in epsilons:
        rows.append(
            (
                f"DPMix l={l}, eps={eps:g} ({accountant})",
                "mixing",
                SynthesisConfig("dpmix", target_epsilon=eps, accountant=accountant, **dpmix),
            )
        )
    return rows


JOB_KIND = "dpmix_core.audit.membership:run_job"
DEFAULT_MEMBERS = 300  # the page's member records: as many non-members come from the same records


def default_members(records: int) -> int:
    """The page's member records for data of ``records`` records: :data:`DEFAULT_MEMBERS`, or fewer where the data
    cannot give as many non-members (a multiple of 50, at least 50)."""
    return max(50, min(DEFAULT_MEMBERS, records // 2 // 50 * 50))


def job_config(
    *,
    l: int,
    T: int,
    epsilons: tuple[float, ...],
    members: int,
    epochs: int,
    seed: int,
    dataset: str = "default",
    records: int | None = None,
    data_file: str | None = None,
    data_sha256: str | None = None,
    label_column: str | None = None,
    feature_range: FeatureRange | None = None,
    categories: Categories = (),
) -> dict:
    """The background job's JSON config for the 'Table 4' attack table (see :func:`run_job`): on ``dataset``, or on
    one's own ``data_file`` (every record a candidate member; the job refuses the file if its bytes no longer hash to
    ``data_sha256``; ``categories``: its text columns' public categories), whose float features are scaled to [0,1]
    by the public ``feature_range``. ``records``: the
    data's training records where known, so that too many members are refused here, before the job starts."""
    if not epsilons:
        raise ValueError("Give at least one epsilon.")
    for eps in epsilons:  # the table has its non-private and noise-free rows already: no 0 or inf here
        check_positive("each epsilon", eps)
    if int(l) > int(members):
        raise ValueError(f"ℓ = {l} records per point is more than the {members} member records a point mixes from.")
    if (data_file is None) != (data_sha256 is None):
        raise ValueError("an attack on a data file needs both its path and its SHA-256.")
    if records is not None and 2 * int(members) > records:
        raise ValueError(
            f"{members} member records need as many non-members: the data has {records:,} records "
            f"(at most {records // 2:,} members)."
        )
    if feature_range is not None:
        feature_range = check_feature_range("public bounds of the features", feature_range)
    own = {
        "data_file": data_file,
        "data_sha256": data_sha256,
        "label_column": label_column,
        "feature_range": None if feature_range is None else json_feature_range(feature_range),
    }
    if categories:  # absent from the attacks on files without text columns (their job keys stay)
        own["categories"] = json_categories(check_categories("categories", categories))
    return {
        "l": int(l),
        "T": int(T),
        "epsilons": [float(e) for e in epsilons],
        "members": int(members),
        "epochs": int(epochs),
        "seed": int(seed),
        "dataset": dataset,
        **(own if data_file is not None else {}),  # the named datasets' attacks keep their keys
    }


def run_job(config: dict, reporter) -> dict:
    """Worker entry point: train and attack every row in a background process (never in the app thread)."""
    from pathlib import Path

    from dpmix_core.data import check_categories, default_dataset, load_dataset, load_user_data, read_data_file

    if config.get("data_file") is not None:
        data = read_data_file(config["data_file"], config["data_sha256"])
        name = Path(config["data_file"]).name
        dataset = load_user_data(
            data,
            filename=name,
            label_column=config.get("label_column"),
            categories=check_categories("categories", config.get("categories") or ()),
        )
    else:
        dataset = default_dataset() if config["dataset"] == "default" else load_dataset(config["dataset"])
    bounds = config.get("feature_range")
    feature_range = None if bounds is None else check_feature_range("public bounds of the features", bounds)
    protocol: dict[str, Any] = {}
    if config.get("data_file") is not None:  # a small table: the own-data linear protocol's step size and inputs
        from dpmix_core.training.protocols import OWN_DATA_LINEAR

        protocol = {
            "lr": OWN_DATA_LINEAR.lr,
            "batch_size": OWN_DATA_LINEAR.batch_size,
            "standardize": OWN_DATA_LINEAR.input_norm == "standardize",
            "feature_range": feature_range,
        }
    reporter.progress(phase="training and attacking", rows=2 + len(config["epsilons"]))
    rows = default_configs(
        l=config["l"],
        T=config["T"],
        epsilons=tuple(config["epsilons"]),
        seed=config["seed"],
        feature_range=feature_range,
    )
    table = membership_table(
        dataset, configs=rows, members=config["members"], epochs=config["epochs"], seed=config["seed"], **protocol
    )
    table = table.replace([math.inf], "inf")
    return {"rows": table.to_dict("records"), "dataset": dataset.source}
