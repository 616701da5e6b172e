"""Sweeps: a base run, one axis with values, series to compare, repeats with distinct seeds.

A spec file (TOML or JSON) looks like::

    name = "thesis-4.2-sigma"
    title = "Thesis §4.2: accuracy vs sigma (class-centric, l = 128)"
    axis = "sigma"                     # sigma | l | T | target_epsilon | label_epsilon | pca_epsilon | dpsgd_epsilon
    values = [0.2, 0.7, 1.5, 3.0]
    repeats = 3                        # seeds base.seed .. base.seed + repeats - 1
    methods = ["mixing", "non-private"]  # optional: one series per method
    mechanisms = ["class-centric"]       # optional: one series per mechanism (mixing runs)
    test_rows = "all"                  # optional: all | even | odd, the test rows its results are read on
    quick = true                       # optional: a fast preview of a full protocol, the one named by
    full_variant = "docs/specs/full.json"  # a preset's name or a spec file's path (from where the CLI runs)

    [base]                             # a RunConfig (see dpmix_core.experiments.config)
    method = "mixing"
    model = "thesis-cnn"
    loss = "ce"
    [base.synthesis]
    mechanism = "class-centric"
    l = 128
    T = 12000
    sigma_x = 0.7

Instead of ``methods``/``mechanisms``, ``[[series]]`` tables name a series and
override base fields (``name = "eps = 20"``, ``synthesis = {target_epsilon = 20.0}``
or ``"synthesis.target_epsilon" = 20.0``); the series name becomes each
run's ``label``.

How an axis value lands in a run depends on the run's method:

=================  ==============================================================
axis               effect
=================  ==============================================================
sigma              mixing: synthesis.sigma_x = v (sigma_y = lambda v), no target epsilon
l, T               mixing: synthesis.l / synthesis.T = v
target_epsilon     mixing: synthesis.target_epsilon = v (inf: sigma = 0, no noise);
                   dp-sgd: dpsgd_epsilon; label-laplace: synthesis.label_epsilon;
                   dp-pca: pca_epsilon (inf: exact PCA)
label_epsilon      label-laplace: synthesis.label_epsilon
pca_epsilon        dp-pca: pca_epsilon
dpsgd_epsilon      dp-sgd: dpsgd_epsilon
=================  ==============================================================

An infinite epsilon for dp-sgd or label-laplace runs the non-private baseline.
Runs the axis does not touch (a non-private baseline, or DP-SGD on a sigma
axis) are the same for every value: ``runs()`` lists each distinct run once.
"""

from __future__ import annotations

import json
import math
import numbers
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpmix_core.data import TEST_ROWS
from dpmix_core.experiments.config import RunConfig, on_dataset, run_key
from dpmix_core.resources.limits import check_sweep_cost
from dpmix_core.synthesis.pipeline import SynthesisConfig
from dpmix_core.training.names import METHODS

__all__ = [
    "AXES",
    "TUNABLE_AXES",
    "AXIS_RULES",
    "AxisRule",
    "Series",
    "Published",
    "PublishedBest",
    "SweepSpec",
    "SPEC_FILE_SUFFIXES",
    "is_spec_file",
    "load_spec",
    "spec_file_name",
    "spec_file_text",
    "sweep_file_stem",
    "axis_value",
    "apply_axis",
]

AXES = ("sigma", "l", "T", "target_epsilon", "label_epsilon", "pca_epsilon", "dpsgd_epsilon")
EPSILON_AXES = ("target_epsilon", "label_epsilon", "pca_epsilon", "dpsgd_epsilon")
# the axes a data holder tunes at a fixed budget: the shape of the release (experiments.best_axis picks their best value)
TUNABLE_AXES = ("l", "T")
_SPEC_KEYS = (
    "name",
    "title",
    "description",
    "axis",
    "values",
    "repeats",
    "base",
    "methods",
    "mechanisms",
    "series",
    "quick",
    "full_variant",
    "published",
    "published_best",
    "test_rows",
)


@dataclass(frozen=True)
class Series:
    """A named variant of the base run: ``overrides`` maps RunConfig fields (``synthesis.x`` for nested) to values."""

    name: str
    overrides: dict = field(default_factory=dict)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if not isinstance(key, str):
            raise ValueError(f"series keys must be strings. Found {key!r}.")
        full = f"{prefix}{key}"
        if isinstance(value, dict) and key == "synthesis" and not prefix:
            out.update(_flatten(value, "synthesis."))
        else:
            out[full] = value
    return out


def _apply(config: dict, overrides: dict) -> dict:
    d = json.loads(json.dumps(config))  # deep copy of a JSON-ready dict
    for key, value in overrides.items():
        if key.startswith("synthesis."):
            sub = key.split(".", 1)[1]
            if d.get("synthesis") is None:
                d["synthesis"] = {}
            d["synthesis"][sub] = value
        else:
            d[key] = value
    if d.get("method") not in ("mixing", "label-laplace"):
        d["synthesis"] = None
    return d


def _number(value: object, what: str) -> float:
    if isinstance(value, str) and value.lower() in ("inf", "+inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise ValueError(f'{what} must be a number (or "inf" for an epsilon). Found {value!r}.')
    return float(value) if not isinstance(value, numbers.Integral) else int(value)


def _check_axis_value(axis: str, value: float) -> float:
    if axis in ("l", "T"):
        if not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())) or value < 1:
            raise ValueError(f"{axis} values must be positive integers. Found {value!r}.")
        return int(value)
    if axis == "sigma":
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"sigma values must be finite and >= 0. Found {value!r}.")
        return float(value)
    if not value > 0:
        raise ValueError(f"{axis} values must be positive (inf for no noise). Found {value!r}.")
    return float(value)


def _is_inf(value: object) -> bool:
    return isinstance(value, float) and math.isinf(value)


def _syn(cfg: RunConfig) -> SynthesisConfig:
    """The run's synthesis config (the rules that call this are for methods that always have one)."""
    if cfg.synthesis is None:
        raise ValueError(f"method {cfg.method!r} has no synthesis config.")
    return cfg.synthesis


def _set_sigma(d: dict, axis: str, value: float) -> None:
    d["synthesis"].update(sigma_x=value, sigma_y=None, target_epsilon=None)


def _set_size(d: dict, axis: str, value: float) -> None:
    d["synthesis"][axis] = value


def _set_mixing_epsilon(d: dict, axis: str, value: float) -> None:
    if _is_inf(value):  # no noise at all
        d["synthesis"].update(sigma_x=0.0, sigma_y=0.0, target_epsilon=None)
    else:
        d["synthesis"].update(target_epsilon=value, sigma_x=None, sigma_y=None)


def _mixing_epsilon(cfg: RunConfig, axis: str) -> float | None:
    syn = _syn(cfg)
    if syn.target_epsilon is not None:
        return syn.target_epsilon
    return math.inf if syn.sigma_x == 0 and (syn.sigma_y or 0) == 0 else None


def _set_dpsgd_epsilon(d: dict, axis: str, value: float) -> None:
    if _is_inf(value):
        d.update(method="non-private", synthesis=None)
    else:
        d["dpsgd_epsilon"] = value


def _set_label_epsilon(d: dict, axis: str, value: float) -> None:
    if _is_inf(value):
        d.update(method="non-private", synthesis=None)
    else:
        d["synthesis"]["label_epsilon"] = value


def _set_pca_epsilon(d: dict, axis: str, value: float) -> None:
    d["pca_epsilon"] = "inf" if _is_inf(value) else value


@dataclass(frozen=True)
class AxisRule:
    """How runs of one method sit on some axes: ``get`` reads a run's position, ``set`` writes a value into
    its JSON dict (inf on an epsilon axis means no noise / non-private)."""

    method: str
    axes: tuple[str, ...]
    get: Callable[[RunConfig, str], float | None]
    set: Callable[[dict, str, float], None]


# The one table of axes (the module docstring says the same in words). A (method, axis) pair not listed
# leaves the run unchanged and has no position on that axis.
AXIS_RULES = (
    AxisRule("mixing", ("sigma",), lambda c, a: _syn(c).sigma_x, _set_sigma),
    AxisRule("mixing", ("l", "T"), lambda c, a: getattr(_syn(c), a), _set_size),
    AxisRule("mixing", ("target_epsilon",), _mixing_epsilon, _set_mixing_epsilon),
    AxisRule("dp-sgd", ("target_epsilon", "dpsgd_epsilon"), lambda c, a: c.dpsgd_epsilon, _set_dpsgd_epsilon),
    AxisRule(
        "label-laplace", ("target_epsilon", "label_epsilon"), lambda c, a: _syn(c).label_epsilon, _set_label_epsilon
    ),
    AxisRule("dp-pca", ("target_epsilon", "pca_epsilon"), lambda c, a: c.pca_epsilon, _set_pca_epsilon),
    AxisRule("non-private", EPSILON_AXES, lambda c, a: math.inf, lambda d, a, v: None),
)


def _rule(method: str, axis: str) -> AxisRule | None:
    return next((r for r in AXIS_RULES if r.method == method and axis in r.axes), None)


def apply_axis(config: dict, axis: str, value: float) -> dict:
    """``config`` (a RunConfig dict) with the axis value applied for its method (see AXIS_RULES)."""
    d = json.loads(json.dumps(config))
    rule = _rule(d["method"], axis)
    if rule is not None:
        rule.set(d, axis, value)
    return d


def axis_value(config: RunConfig | dict, axis: str) -> float | None:
    """The run's position on ``axis`` (AXIS_RULES): None when the axis does not apply to its method."""
    cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(config)
    if axis not in AXES:
        raise ValueError(f"Unknown axis {axis!r}. Choose one of: {', '.join(AXES)}.")
    rule = _rule(cfg.method, axis)
    return None if rule is None else rule.get(cfg, axis)


def _published_accuracy(series: object, accuracy: object, what: str) -> float:
    """A published number's accuracy as a fraction in [0, 1], checked with the name of its series."""
    if not isinstance(series, str) or not series:
        raise ValueError(f"a {what} needs the name of its series. Found {series!r}.")
    value = _number(accuracy, "published accuracy")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"published accuracy must be a fraction in [0, 1]. Found {accuracy!r}.")
    return value


@dataclass(frozen=True)
class Published:
    """A number a paper printed for one point of the sweep: ``accuracy`` (0-1) of ``series`` at axis ``value``.

    ``reference=True`` marks a published point of a method this sweep does not run (e.g. the state
    of the art for the same epsilon, Dockhorn et al. 2022): drawn for orientation, labelled
    "published, not ours", and never given a verdict. ``dataset`` names the data the number is for
    (e.g. DP-CDA Table 2's FashionMNIST row); empty: the sweep's own (its base run's dataset).
    """

    series: str
    value: float
    accuracy: float
    source: str = ""
    reference: bool = False
    dataset: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "accuracy", _published_accuracy(self.series, self.accuracy, "published point"))
        object.__setattr__(self, "value", _number(self.value, "published value"))
        if not isinstance(self.reference, bool):
            raise ValueError(f"published reference must be true or false. Found {self.reference!r}.")
        if not isinstance(self.dataset, str):
            raise ValueError(f"published dataset must be a dataset's name. Found {self.dataset!r}.")

    def to_dict(self) -> dict:
        value = "inf" if isinstance(self.value, float) and math.isinf(self.value) else self.value
        out = {"series": self.series, "value": value, "accuracy": self.accuracy, "source": self.source}
        if self.reference:  # only when set: specs stored before the flag keep their identity
            out["reference"] = True
        if self.dataset:  # likewise
            out["dataset"] = self.dataset
        return out


@dataclass(frozen=True)
class PublishedBest:
    """A number a paper printed for the best axis value of one series, not for one point: ``accuracy`` (0-1) of
    ``series`` at whichever value of the sweep's axis the paper found best (DPFMix Table 1 reports the best m of
    each cell and does not say which m). Compared with the value chosen on the even test rows
    (``experiments.best_axis``). ``dataset`` as in :class:`Published`.
    """

    series: str
    accuracy: float
    source: str = ""
    dataset: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "accuracy", _published_accuracy(self.series, self.accuracy, "published best"))
        if not isinstance(self.source, str) or not isinstance(self.dataset, str):
            raise ValueError(
                f"a published best's source and dataset are text. Found {self.source!r}, {self.dataset!r}."
            )

    def to_dict(self) -> dict:
        out = {"series": self.series, "accuracy": self.accuracy, "source": self.source}
        if self.dataset:
            out["dataset"] = self.dataset
        return out


@dataclass(frozen=True)
class SweepSpec:
    """A sweep: ``base`` run, ``axis`` with ``values``, ``series`` to compare, ``repeats`` seeds each.

    ``quick`` marks the fast variant of a protocol (``full_variant`` names the full one: a preset, or the path of
    a spec file, a .toml or .json, from the folder the CLI or app runs in);
    ``published`` holds the numbers the paper printed for points of this sweep (drawn next to ours);
    ``published_best`` those it printed for a series' best axis value (:class:`PublishedBest`).
    ``test_rows`` says which rows of the test split its results report (:data:`TEST_ROWS`; "odd" when the even
    rows gave the release's public constants).
    Validated on construction: every run it expands to is a valid RunConfig.
    """

    name: str
    base: RunConfig
    axis: str
    values: tuple
    series: tuple[Series, ...] = ()
    repeats: int = 1
    title: str = ""
    description: str = ""
    quick: bool = False
    full_variant: str | None = None
    published: tuple[Published, ...] = ()
    test_rows: str = "all"
    published_best: tuple[PublishedBest, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("a sweep needs a non-empty name.")
        if not isinstance(self.base, RunConfig):
            raise ValueError(f"base must be a RunConfig. Found {type(self.base).__name__}.")
        if self.axis not in AXES:
            raise ValueError(f"Unknown axis {self.axis!r}. Choose one of: {', '.join(AXES)}.")
        if not isinstance(self.values, (list, tuple)) or len(self.values) == 0:
            raise ValueError(f"values must be a non-empty list of numbers for axis {self.axis!r}.")
        values = tuple(_check_axis_value(self.axis, _number(v, f"{self.axis} value")) for v in self.values)
        if len(set(values)) != len(values):
            raise ValueError(f"values must be distinct. Found {list(self.values)}.")
        object.__setattr__(self, "values", values)
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, numbers.Integral) or self.repeats < 1:
            raise ValueError(f"repeats must be a positive integer. Found {self.repeats!r}.")
        series = tuple(self.series)
        for s in series:
            if not isinstance(s, Series) or not s.name:
                raise ValueError(f"each series needs a name and overrides. Found {s!r}.")
        if len({s.name for s in series}) != len(series):
            raise ValueError("series names must be distinct.")
        object.__setattr__(self, "series", series)
        published = tuple(
            p if isinstance(p, Published) else Published(**p) if isinstance(p, dict) else p for p in self.published
        )
        names = {s.name for s in self._series()}
        for p in published:
            if not isinstance(p, Published):
                raise ValueError(f"published points are tables with series, value, accuracy. Found {p!r}.")
            if p.series not in names and not p.reference:
                raise ValueError(
                    f"published point for unknown series {p.series!r}; series: {', '.join(sorted(names))}."
                )
        object.__setattr__(self, "published", published)
        best = tuple(PublishedBest(**b) if isinstance(b, dict) else b for b in self.published_best)
        if best and self.axis not in TUNABLE_AXES:
            raise ValueError(
                f"published_best is for an axis a data holder tunes at a fixed budget (l or T), not {self.axis!r}."
            )
        for b in best:
            if not isinstance(b, PublishedBest):
                raise ValueError(f"published_best entries are tables with series, accuracy (and source). Found {b!r}.")
            if b.series not in names:
                raise ValueError(f"published best for unknown series {b.series!r}; series: {', '.join(sorted(names))}.")
        object.__setattr__(self, "published_best", best)
        if self.full_variant is not None and (not isinstance(self.full_variant, str) or not self.full_variant.strip()):
            raise ValueError(f"full_variant names a preset or a spec file. Found {self.full_variant!r}.")
        if self.test_rows not in TEST_ROWS:
            raise ValueError(f"test_rows must be one of {', '.join(TEST_ROWS)}. Found {self.test_rows!r}.")
        check_sweep_cost(len(self._series()) * len(values) * self.repeats)  # before any list is built
        self._expand(repeats=1)  # every run must be valid (a run's seed never makes it invalid)

    def _series(self) -> tuple[Series, ...]:
        return self.series or (Series(self.base.label or self.base.method, {}),)

    def published_for(self, dataset: str) -> tuple[Published, ...]:
        """The published points for ``dataset``: those naming it, and the untagged ones when it is the sweep's own
        (a paper's MNIST numbers are no reference for another dataset, nor for a sample of MNIST)."""
        return tuple(p for p in self.published if (p.dataset or self.base.dataset) == dataset)

    def published_best_for(self, dataset: str) -> tuple[PublishedBest, ...]:
        """The published best-value numbers for ``dataset`` (as :meth:`published_for`)."""
        return tuple(b for b in self.published_best if (b.dataset or self.base.dataset) == dataset)

    @property
    def series_names(self) -> tuple[str, ...]:
        """The names of the series it runs (one, the base run's label or method, when it lists none)."""
        return tuple(s.name for s in self._series())

    def runs(self) -> list[RunConfig]:
        """Every distinct run, in order: series, then axis value, then repeat (seed)."""
        return self._expand(self.repeats)

    def _expand(self, repeats: int) -> list[RunConfig]:
        out: list[RunConfig] = []
        seen: set[str] = set()
        base = self.base.to_dict()
        for s in self._series():
            try:
                series_base = _apply(base, s.overrides)
                if series_base.get("dataset") != base.get("dataset"):  # a series on other data: its own constants
                    moved = RunConfig.from_dict({**series_base, "dataset": base.get("dataset")})
                    series_base = on_dataset(moved, series_base["dataset"], series_base.get("data_dir")).to_dict()
                series_base["label"] = s.name
                for value in self.values:
                    with_value = apply_axis(series_base, self.axis, value)
                    for r in range(repeats):
                        cfg = RunConfig.from_dict({**with_value, "seed": self.base.seed + r})
                        key = run_key(cfg)
                        if key not in seen:
                            seen.add(key)
                            out.append(cfg)
            except ValueError as exc:
                raise ValueError(f"series {s.name!r}: {exc}") from None
        return out

    def to_dict(self) -> dict:
        """JSON-ready; ``load_spec`` reads it back."""
        out = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "axis": self.axis,
            "values": ["inf" if isinstance(v, float) and math.isinf(v) else v for v in self.values],
            "repeats": self.repeats,
            "quick": self.quick,
            "full_variant": self.full_variant,
            "base": self.base.to_dict(),
        }
        if self.series:
            out["series"] = [{"name": s.name, **s.overrides} for s in self.series]
        if self.published:
            out["published"] = [p.to_dict() for p in self.published]
        if self.test_rows != "all":  # specs that report every row keep the JSON they were stored with
            out["test_rows"] = self.test_rows
        if self.published_best:  # likewise
            out["published_best"] = [b.to_dict() for b in self.published_best]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> SweepSpec:
        if not isinstance(d, dict):
            raise ValueError(f"a sweep spec must be a table/dict. Found {type(d).__name__}.")
        unknown = sorted(set(d) - set(_SPEC_KEYS))
        if unknown:
            raise ValueError(f"unknown sweep key(s) {', '.join(map(repr, unknown))}; known: {', '.join(_SPEC_KEYS)}.")
        for key in ("name", "axis", "values", "base"):
            if key not in d:
                raise ValueError(f"a sweep spec needs {key!r}.")
        try:
            base = RunConfig.from_dict(d["base"])
        except ValueError as exc:
            raise ValueError(f"base: {exc}") from None
        series = _series_from(d, base)
        values = d["values"]
        if not isinstance(values, list):
            values = [values] if not isinstance(values, tuple) else list(values)
        return cls(
            name=d["name"],
            base=base,
            axis=d["axis"],
            values=tuple(values),
            series=series,
            repeats=d.get("repeats", 1),
            title=d.get("title", ""),
            description=d.get("description", ""),
            quick=bool(d.get("quick", False)),
            full_variant=d.get("full_variant"),
            published=tuple(_published_from(d.get("published", []))),
            test_rows=d.get("test_rows", "all"),
            published_best=tuple(_published_best_from(d.get("published_best", []))),
        )


def _published_from(raw) -> list[Published]:
    return _tables_from(
        raw,
        Published,
        "published",
        "published point",
        ("series", "value", "accuracy"),
        ("source", "reference", "dataset"),
    )


def _published_best_from(raw) -> list[PublishedBest]:
    return _tables_from(
        raw, PublishedBest, "published_best", "published best", ("series", "accuracy"), ("source", "dataset")
    )


def _tables_from(raw, cls, key: str, what: str, needs: tuple[str, ...], optional: tuple[str, ...]) -> list:
    """A spec's ``key``: a list of tables, each one ``cls(**table)`` (a ``what``) with the keys ``needs`` and any of
    ``optional``."""
    fields = f"{', '.join(needs)} (and {', '.join(optional)})"
    if not isinstance(raw, list):
        raise ValueError(f"{key} must be a list of tables with {fields}.")
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or set(entry) - {*needs, *optional}:
            raise ValueError(f"each {what} is a table with {fields}. Found {entry!r}.")
        try:
            out.append(cls(**entry))
        except TypeError:
            raise ValueError(f"a {what} needs {', '.join(needs[:-1])} and {needs[-1]}. Found {entry!r}.") from None
    return out


def _series_from(d: dict, base: RunConfig) -> tuple[Series, ...]:
    methods, mechanisms, raw = d.get("methods"), d.get("mechanisms"), d.get("series")
    if raw is not None and (methods is not None or mechanisms is not None):
        raise ValueError("give either 'series' or 'methods'/'mechanisms', not both.")
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            raise ValueError("series must be a non-empty list of tables, each with a name.")
        out = []
        for entry in raw:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise ValueError(f"each series needs a name. Found {entry!r}.")
            overrides = _flatten({k: v for k, v in entry.items() if k != "name"})
            out.append(Series(entry["name"], overrides))
        return tuple(out)
    if methods is None and mechanisms is None:
        return ()
    for what, items in (("methods", methods), ("mechanisms", mechanisms)):
        if items is not None and (not isinstance(items, list) or not items):
            raise ValueError(f"{what} must be a non-empty list.")
    if methods is not None:
        bad = [m for m in methods if m not in METHODS]
        if bad:
            raise ValueError(f"Unknown method(s) {bad}. Choose from: {', '.join(METHODS)}.")
    out = []
    for method in methods or [base.method]:
        if method == "mixing" and mechanisms:
            for mech in mechanisms:
                out.append(Series(f"mixing: {mech}", {"method": "mixing", "synthesis.mechanism": mech}))
        else:
            out.append(Series(method, {"method": method}))
    return tuple(out)


SPEC_FILE_SUFFIXES = (".toml", ".json")


def is_spec_file(name: str) -> bool:
    """Whether ``name`` is a spec file's path (it ends in .toml or .json) rather than a preset's name."""
    return Path(name).suffix.lower() in SPEC_FILE_SUFFIXES


def sweep_file_stem(sweep: str) -> str:
    """A file name's stem for a sweep (its spec, its report): its name with anything but letters, digits, '-' and
    '_' as '_'."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in sweep)


def spec_file_name(sweep: str) -> str:
    """A spec file's name for a sweep: :func:`sweep_file_stem` + .json."""
    return sweep_file_stem(sweep) + ".json"


def spec_file_text(spec: SweepSpec | dict, name: str) -> str:
    """``spec`` (or its :meth:`SweepSpec.to_dict`) as the JSON of a spec file whose sweep is ``name`` (the file's
    stem, so that a preset written out and run is a sweep of its own; its unchanged runs keep their keys).
    :func:`load_spec` reads it back."""
    data = spec.to_dict() if isinstance(spec, SweepSpec) else dict(spec)
    return json.dumps({**data, "name": name}, indent=2, allow_nan=False) + "\n"


def load_spec(source: str | Path | dict) -> SweepSpec:
    """A SweepSpec from a dict, or a .toml / .json file path."""
    if isinstance(source, SweepSpec):
        return source
    if isinstance(source, dict):
        return SweepSpec.from_dict(source)
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"spec file {str(path)!r} does not exist.")
    if not is_spec_file(path.name):
        raise ValueError(f"spec files must end in {' or '.join(SPEC_FILE_SUFFIXES)}. Found {path.name!r}.")
    text = path.read_text(encoding="utf-8")
    try:
        data: Any = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot parse {path.name}: {exc}") from None
    return SweepSpec.from_dict(data)
