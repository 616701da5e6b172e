"""Best release for a budget as a background job: pages build the search here, submit and poll, never train.

A search (:class:`~dpmix_core.experiments.best_release.BestReleaseSearch`) travels to the worker as a JSON-ready
dict (:func:`search_config`, read back by :func:`search_from_config`); the worker's :func:`run_job` runs it and
stores :meth:`~dpmix_core.experiments.best_release.BestRelease.to_dict` plus the trial table's rows. An identical
search reuses its run (the key is the config's). One's own upload is kept beside the store by the page
(:func:`~dpmix_core.experiments.audits.attack_data_upload`'s folder), where the worker reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dpmix_core.experiments.best_release import (
    BestReleaseSearch,
    SearchSpace,
    mix_degree_refusal,
    search_cost,
    search_refusal,
)
from dpmix_core.experiments.run_data import OwnData
from dpmix_core.privacy.checks import FeatureRange
from dpmix_core.runtime.jobs import JobManager
from dpmix_core.runtime.store import ResultStore, Run, config_key
from dpmix_core.training.names import CLOSED_FORM_MODELS

__all__ = [
    "JOB_KIND",
    "TRIAL_COLUMNS",
    "page_search",
    "search_config",
    "search_from_config",
    "search_plan",
    "run_job",
    "submit_best_release",
    "best_release_run",
    "trial_rows",
    "chosen_release_files",
]

JOB_KIND = "dpmix_core.experiments.best_release_jobs:run_job"
TRIAL_COLUMNS = (  # the trial table's columns in reading order (the store keeps a result's keys sorted)
    "chosen",
    "m",
    "T",
    "λ",
    "training",
    "σx",
    "ε upper bound (pld-poisson)",
    "pooled validation accuracy (%)",
    "own validation accuracy (%)",
    "note",
)


def page_search(
    *,
    target_epsilon: float,
    delta: float,
    mix_degrees: Sequence[int],
    num_points: Sequence[int],
    sigma_ratios: Sequence[float],
    model: str,
    selection: str,
    selection_epsilon: float | None = None,
    dataset: str = "embedded",
    own: OwnData | None = None,
    feature_range: FeatureRange | None = None,
    range_epsilon: float | None = None,
    seed: int = 0,
) -> BestReleaseSearch:
    """The search a page describes: a named ``dataset``, or one's own file (``own``, with its public ``feature_range``
    and, narrowing it privately, ``range_epsilon``; ``dataset`` is then ignored). ValueError (one line) for a setting
    the search refuses."""
    file_options: dict[str, Any] = {}
    if own is not None:
        file_options = {k: v for k, v in own.options.items() if k != "dataset"}
        file_options["feature_range"] = feature_range
        file_options["range_epsilon"] = range_epsilon
        file_options["exact_features"] = own.exact_features
        dataset = str(own.options["dataset"])
    return BestReleaseSearch(
        target_epsilon=target_epsilon,
        delta=delta,
        dataset=dataset,
        space=SearchSpace(tuple(mix_degrees), tuple(num_points), tuple(sigma_ratios)),
        model=model,
        selection=selection,
        selection_epsilon=selection_epsilon,
        seed=seed,
        device="cpu",
        **file_options,
    )


def search_plan(search: BestReleaseSearch) -> tuple[str, str | None]:
    """(what the search will do, in one sentence; why it would be refused, or None): read before anything starts."""
    runs = len(search.space.candidates())
    finalists = f", then {search.finalist_count} finalists longer" if search.has_finalist_round else ""
    if refusal := mix_degree_refusal(search):  # no release to estimate
        return f"{runs} candidate releases{finalists}", refusal
    cost = search_cost(search)
    text = f"{runs} candidate releases{finalists}: about {max(cost.seconds, 1.0) / 60:.1f} min on 2 cores (rough)"
    return text, search_refusal(search)


def search_config(search: BestReleaseSearch) -> dict[str, Any]:
    """The search as a JSON-ready dict (tuples as lists), the job's config and key."""
    config = asdict(search)
    config["space"] = {k: list(v) for k, v in config["space"].items()}
    config["categories"] = [[name, list(words)] for name, words in search.categories]
    if search.feature_range is not None:
        config["feature_range"] = _lists(search.feature_range)
    if search.range_epsilon is None:  # no private ranges: the key of a search stored before they existed
        config.pop("range_epsilon")
    if not search.exact_features:  # ranges over every feature: the key of a search stored before one-hots were left out
        config.pop("exact_features")
    else:
        config["exact_features"] = list(search.exact_features)
    return config


def _lists(value: Any) -> Any:
    return [_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, (tuple, list)) else value


def search_from_config(config: Mapping[str, Any]) -> BestReleaseSearch:
    """:func:`search_config`'s dict read back (ValueError for one that does not describe a search)."""
    fields = dict(config)
    fields["space"] = SearchSpace(**{k: tuple(v) for k, v in fields["space"].items()})
    fields["categories"] = _tuples(fields.get("categories") or ())
    if fields.get("feature_range") is not None:
        fields["feature_range"] = _tuples(fields["feature_range"])
    fields["exact_features"] = _tuples(fields.get("exact_features") or ())
    return BestReleaseSearch(**fields)


def run_job(config: dict, reporter) -> dict:
    """Worker entry point: the search in a background process (never in the app thread), its lines as progress.

    With ``config["release_dir"]`` (a folder; the page passes one beside the store) the chosen release is written
    there too, ``best_release_<key>.npz`` with its card (:func:`~dpmix_core.experiments.best_release.chosen_card`),
    and the result names both files ("release_file", "release_card")."""
    from dpmix_core.experiments.best_release import chosen_card, chosen_release, run_search

    config = dict(config)
    release_dir = config.pop("release_dir", None)
    search = search_from_config(config)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        reporter.progress(phase=line, steps=len(lines))
        reporter.check()  # a cancelled job stops between steps

    best = run_search(search, progress=say)
    out = {**best.to_dict(), "rows": trial_rows(best.to_dict()), "log": lines}
    if release_dir is not None:
        from dpmix_core.synthesis.export import write_release

        say("writing the chosen release")
        folder = Path(release_dir)
        folder.mkdir(parents=True, exist_ok=True)
        synthesis = chosen_release(best)
        name = f"best_release_{config_key({'kind': JOB_KIND, **config})[:12]}.npz"
        written, card = write_release(synthesis, folder / name, card=chosen_card(best, synthesis))
        out["release_file"], out["release_card"] = str(written), str(card)
    return out


def submit_best_release(search: BestReleaseSearch, store: ResultStore | None = None) -> int:
    """Queue the search and start it now; an identical search reuses its run. The chosen release is written beside
    the store (``<store folder>/best_releases/``), where the page offers it for download."""
    store = store if store is not None else ResultStore()
    config = {**search_config(search), "release_dir": str(store.path.parent / "best_releases")}
    manager = JobManager(store)
    return manager.submit(JOB_KIND, config, key=config_key({"kind": JOB_KIND, **config})).id


def best_release_run(run_id: int, store: ResultStore | None = None) -> Run | None:
    """The search's run after one scheduling step (starts queued work, notices finished or dead workers)."""
    manager = JobManager(store if store is not None else ResultStore())
    manager.pump()
    return manager.get(run_id)


def chosen_release_files(payload: Mapping[str, Any]) -> tuple[Path, Path] | None:
    """(the chosen release's .npz, its card) that the search's job wrote, or None where it wrote none or they are
    gone (a store folder cleaned by hand)."""
    if payload.get("release_file") is None or payload.get("release_card") is None:
        return None
    files = Path(payload["release_file"]), Path(payload["release_card"])
    return files if all(f.is_file() for f in files) else None


def trial_rows(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trial table of a search's JSON (:meth:`BestRelease.to_dict`): one row a training, the chosen marked,
    accuracies in percent (1 decimal), epsilon and sigma to 4 significant digits; None where a trial has none."""
    chosen = payload["chosen"]
    rows = []
    for t in payload["trials"]:
        c = t["candidate"]
        closed = payload["search"]["model"] in CLOSED_FORM_MODELS
        rows.append(
            {
                "chosen": "✔" if t == chosen else "",
                "m": c["m"],
                "T": c["T"],
                "λ": c["sigma_ratio"],
                "training": "closed form" if closed else f"{t['epochs']} epochs",
                "σx": _digits(t["sigma_x"]),
                "ε upper bound (pld-poisson)": _digits(t["certified_epsilon"]),
                "pooled validation accuracy (%)": _percent(t["pooled_accuracy"]),
                "own validation accuracy (%)": _percent(t["val_accuracy"]),
                "note": t["error"] or ("collapsed: never left the constant predictor" if t["collapsed"] else ""),
            }
        )
    return rows


def _digits(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def _percent(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)
