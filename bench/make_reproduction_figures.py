"""Regenerate the figures and markdown tables of docs/REPRODUCTION.md from a results store.

Usage (after the sweeps in docs/REPRODUCTION.md have run)::

    .venv/bin/python bench/make_reproduction_figures.py --store results/repro.sqlite \
        --out docs/figures > /tmp/repro_tables.md

For every sweep found in the store (by default: every preset, full then quick, in the report's order) it builds the
aggregated table with :func:`dpmix_core.experiments.trade_offs.sweep_results` (mean ± sample std over seeds), saves
``<out>/<sweep>.png`` (accuracy in % vs the sweep axis, error bars = ±1 std, one line per series,
runs the axis does not move as horizontal lines, ε on a secondary axis where the axis is σ) and prints a
markdown table per sweep. Nothing is recomputed: only finished runs in the store are read.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpmix_core.experiments.results import all_collapsed, collapsed_note, partly_collapsed  # noqa: E402
from dpmix_core.experiments.trade_offs import (  # noqa: E402
    AXIS_TITLES,
    best_axis_table,
    sweep_best_axis,
    sweep_comparison,
    sweep_published,
    sweep_results,
    sweep_rows,
)
from dpmix_core.runtime.store import ResultStore  # noqa: E402
from dpmix_core.training.names import TEST_INPUTS  # noqa: E402

REPORT_ORDER = (
    "thesis-4.1",
    "thesis-4.2-l",
    "thesis-4.2-sigma",
    "thesis-4.2-t",
    "dpcda-table2",
    "dpfmix-table1",
    "dpfmix-table1-m",
    "dpfmix-table3",
    "label-dp",
    "dp-pca",
    "all-methods",
)
DEFAULT_SWEEPS = tuple(name for base in REPORT_ORDER for name in (base, f"{base}-quick"))
LOG_AXES = {"l", "T", "target_epsilon", "label_epsilon", "pca_epsilon", "dpsgd_epsilon"}

plt.rcParams.update(
    {
        "font.size": 13,
        "axes.titlesize": 13,
        "axes.labelsize": 13,
        "legend.fontsize": 11,
        "xtick.labelsize": 12,
        "ytick.labelsize": 12,
    }
)


def _finite(v) -> bool:
    return v is not None and not pd.isna(v) and math.isfinite(float(v))


def _is_inf(v) -> bool:
    return v is not None and not pd.isna(v) and math.isinf(float(v))


def _fmt(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return f"{v:.{digits}f}"


def run_counts(store: ResultStore, sweep: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for run in store.list_runs(sweep=sweep, status=None):
        counts[run.status] += 1
    return dict(counts)


def sigma_by_group(store: ResultStore, sweep: str, axis: str | None, agg: pd.DataFrame) -> dict:
    """Mean calibrated sigma_x per (label, axis value) of mixing runs (not an aggregate column)."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.results import axis_value

    acc: dict = defaultdict(list)
    for row in sweep_rows(store, sweep):
        res = row.get("result") or {}
        if res.get("sigma_x") is None:
            continue
        cfg = RunConfig.from_dict(row["config"])
        av = axis_value(cfg, axis) if axis else None
        acc[(cfg.label or cfg.method, None if av is None else float(av))].append(float(res["sigma_x"]))
    return {k: sum(v) / len(v) for k, v in acc.items()}


def accuracy_cell(r: pd.Series, dead: bool, *, spread: bool = True) -> str:
    """An aggregated row's test accuracy in % (± its std with ``spread``); "collapsed (...: no result)" where
    every run collapsed (``dead``), and "k of n runs collapsed, left out of the mean" where some did."""
    acc = f"{100 * r['test_accuracy_mean']:.2f}"
    if spread and _finite(r.get("test_accuracy_std")):
        acc += f" ± {100 * r['test_accuracy_std']:.2f}"
    if dead:
        return f"collapsed ({acc}: did not learn, no result)"
    lost = collapsed_note(r)
    return f"{acc} ({lost})" if lost else acc


def markdown_table(agg: pd.DataFrame, axis: str | None, sigmas: dict) -> str:
    eps_cols = [c for c in agg.columns if c.startswith("epsilon_")]
    show_mse = agg["test_mse_count"].fillna(0).astype(int).sum() > 0
    head = ["series", AXIS_TITLES.get(axis or "", axis or "axis"), "test acc. (%)", "n"]
    if show_mse:
        head.append("test MSE")
    if sigmas:
        head.append("σx (calibrated)")
    head += [f"ε {c.removeprefix('epsilon_')}" for c in eps_cols] + ["δ", "s/run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    dead = all_collapsed(agg)
    for i, r in agg.sort_values(["label", "axis_value"], na_position="first").iterrows():
        acc = accuracy_cell(r, bool(dead[i]))
        cells = [
            str(r["label"]),
            _fmt(r["axis_value"], 4).rstrip("0").rstrip(".") if _finite(r["axis_value"]) else _fmt(r["axis_value"]),
            acc,
            str(int(r["test_accuracy_count"])),
        ]
        if show_mse:
            mse = _fmt(r["test_mse_mean"], 3)
            if _finite(r["test_mse_std"]):
                mse += f" ± {r['test_mse_std']:.3f}"
            cells.append(mse)
        if sigmas:
            key = (r["label"], None if not _finite(r["axis_value"]) else float(r["axis_value"]))
            cells.append(_fmt(sigmas.get(key), 4))
        cells += [_fmt(r[c], 3) for c in eps_cols]
        cells += [f"{r['delta']:.3g}" if _finite(r["delta"]) else "—", _fmt(r["seconds_mean"], 0)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def training_summary(store: ResultStore, sweep: str, axis: str | None) -> str:
    """Per run: training loss at the first and last epoch (a diagnostic for under-training)."""
    from dpmix_core.experiments.config import RunConfig
    from dpmix_core.experiments.results import axis_value

    lines = [
        "<details><summary>per-run training loss (first → last epoch)</summary>",
        "",
        "| run | method | axis value | seed | epochs | loss first → last | test acc. (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in sweep_rows(store, sweep):
        res = row.get("result") or {}
        hist = res.get("history") or []
        cfg = RunConfig.from_dict(row["config"])
        av = axis_value(cfg, axis) if axis else None
        losses = [h.get("loss") for h in hist if h.get("loss") is not None]
        loss = f"{losses[0]:.4g} → {losses[-1]:.4g}" if losses else "—"
        acc = res.get("test_accuracy")
        lines.append(
            f"| {row['id']} | {cfg.method} | {_fmt(av, 4)} | {cfg.seed} | {len(hist)} | {loss} | "
            f"{_fmt(None if acc is None else 100 * acc)} |"
        )
    lines += ["", "</details>"]
    return "\n".join(lines)


DEAD_LABEL_WIDTH = 70  # characters of the collapsed runs' legend entry on one line


def _dead_label(dead_series: dict[str, list[float]]) -> str:
    """The grey crosses' legend entry, naming the series they belong to (and where, when there are several).

    A long entry puts one series per line, so the legend beside the plot does not widen the figure.
    """
    if len(dead_series) == 1:
        return f"collapsed (did not learn): {next(iter(dead_series))}"
    parts = [
        f"{name} at {', '.join(_fmt(v, 4).rstrip('0').rstrip('.') for v in values)}"
        for name, values in dead_series.items()
    ]
    one_line = "collapsed (did not learn): " + "; ".join(parts)
    return one_line if len(one_line) <= DEAD_LABEL_WIDTH else "collapsed (did not learn):\n  " + "\n  ".join(parts)


def _plot_series(ax, agg: pd.DataFrame, metric: str, scale: float, transform=None) -> list:
    mean, std = f"{metric}_mean", f"{metric}_std"
    finite = agg[agg["axis_value"].map(_finite) & agg[mean].notna()]
    flat = agg[~agg.index.isin(finite.index) & agg[mean].notna()]
    handles = []
    dead_x: list = []
    dead_y: list = []
    dead_series: dict[str, list[float]] = {}  # which series the grey crosses belong to, for the legend
    any_open = False
    for label, part in finite.groupby("label", sort=False):
        part = part.sort_values("axis_value")
        dead = all_collapsed(part)  # a run at the constant predictor is no result: a grey cross, not a point
        y = part[mean] * scale
        if transform is not None:
            y = transform(y)
        dead_x += list(part["axis_value"][dead])
        dead_y += list(y[dead])
        if dead.any():
            dead_series[str(label)] = [float(v) for v in part["axis_value"][dead]]
        part, y = part[~dead], y[~dead]
        if part.empty:
            continue
        err = part[std].fillna(0.0) * scale
        h = ax.errorbar(
            part["axis_value"], y, yerr=err, marker="o", linewidth=2, markersize=6, capsize=4, label=str(label)
        )
        handles.append(h)
        partly = partly_collapsed(part)
        if partly.any():  # the mean of the runs that learned: hollow, so it is not read as every run's result
            any_open = True
            ax.scatter(
                part["axis_value"][partly],
                y[partly],
                marker="o",
                s=70,
                facecolors="white",
                edgecolors=h[0].get_color(),
                linewidths=2,
                zorder=6,
            )
    if any_open:
        handles.append(
            ax.scatter(
                [],
                [],
                marker="o",
                s=70,
                facecolors="white",
                edgecolors="0.25",
                linewidths=2,
                label="open: some runs collapsed (mean of the others)",
            )
        )
    if dead_x:
        handles.append(
            ax.scatter(dead_x, dead_y, marker="x", s=70, color="0.45", zorder=5, label=_dead_label(dead_series))
        )
    for i, (_, row) in enumerate(flat.iterrows()):
        y = row[mean] * scale
        if transform is not None:
            y = transform(pd.Series([y])).iloc[0]
        at_inf = " at ∞" if _is_inf(row["axis_value"]) and "non-private" not in str(row["label"]) else ""
        h = ax.axhline(
            y,
            linestyle=":",
            color=f"C{(len(handles) + i) % 10}",
            linewidth=2,
            label=f"{row['label']}{at_inf} ({y:.2f}{'%' if scale == 100 else ''})",
        )
        handles.append(h)
    return handles


def _plain_ticks(ax, values) -> None:
    """Tick at the swept values, written plainly (1, 2, 4, 8 rather than 2x10^0)."""
    from matplotlib.ticker import NullFormatter, NullLocator

    ax.set_xticks(list(values))
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _plot_published(ax, published) -> list:
    """The papers' numbers as open stars (one marker set per series)."""
    handles = []
    references = [p for p in published if p.reference and math.isfinite(p.value)]
    for j, name in enumerate(sorted({p.series for p in references})):
        pts = [p for p in references if p.series == name]
        h = ax.scatter(
            [p.value for p in pts],
            [100 * p.accuracy for p in pts],
            marker="Dsp^"[j % 4],
            s=70,
            color="0.45",
            zorder=5,
            label=f"published, not ours — {name} ({pts[0].source.split(',')[0]})",
        )
        handles.append(h)
    series = sorted({p.series for p in published if math.isfinite(p.value) and not p.reference})
    for i, name in enumerate(series):
        pts = [p for p in published if p.series == name and math.isfinite(p.value) and not p.reference]
        h = ax.scatter(
            [p.value for p in pts],
            [100 * p.accuracy for p in pts],
            marker="*",
            s=260,
            facecolors="none",
            edgecolors=f"C{(i + 6) % 10}",
            linewidths=1.8,
            zorder=5,
            label=f"published — {name}",
        )
        handles.append(h)
    return handles


def comparison_markdown(table: pd.DataFrame) -> str:
    head = list(table.columns)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table.itertuples(index=False):
        lines.append(
            "| "
            + " | ".join(
                "—"
                if (v is None or (isinstance(v, float) and math.isnan(v)))
                else (f"{v:g}" if isinstance(v, float) else str(v))
                for v in row
            )
            + " |"
        )
    return "\n".join(lines)


def figure(agg: pd.DataFrame, axis: str | None, title: str, sweep: str, path: Path, published=()) -> None:
    is_label = sweep.startswith("label-dp")
    is_pca = sweep.startswith("dp-pca")
    ncols = 2 if is_label else 1
    fig, axes = plt.subplots(1, ncols, figsize=(8.5 * ncols, 5.6), squeeze=False)
    ax = axes[0][0]
    xlabel = AXIS_TITLES.get(axis or "", axis or "")
    if is_label:
        cls = agg[~agg["label"].str.contains("regression")]
        _plot_series(ax, cls, "test_accuracy", 100.0)
        ax.set_ylabel("test accuracy (%)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_ticks(ax, sorted({float(v) for v in agg["axis_value"] if _finite(v)}))
        ax.set_title("classification (Δf = 2)")
        ax.set_xlabel(xlabel)
        ax.legend(loc="lower right")
        ax2 = axes[0][1]
        reg = agg[agg["test_mse_count"].fillna(0) > 0]
        _plot_series(ax2, reg, "test_mse", 1.0)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        _plain_ticks(ax2, sorted({float(v) for v in agg["axis_value"] if _finite(v)}))
        ax2.set_ylabel("test MSE (label as 0–9)")
        ax2.set_xlabel(xlabel)
        ax2.set_title("regression (Δf = 9)")
        ax2.legend(loc="upper right")
        for a in axes[0]:
            a.grid(True, which="both", alpha=0.3)
    elif is_pca:
        _plot_series(ax, agg, "test_accuracy", 100.0, transform=lambda y: 100.0 - y)
        ax.set_ylabel("classification error (%)")
        ax.set_xscale("log")
        _plain_ticks(ax, sorted({float(v) for v in agg["axis_value"] if _finite(v)}))
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper right")
    else:
        handles = _plot_series(ax, agg, "test_accuracy", 100.0)
        handles += _plot_published(ax, published)
        ax.set_ylabel("test accuracy (%)")
        ax.set_xlabel(xlabel)
        finite_x = sorted({float(v) for v in agg["axis_value"] if _finite(v)})
        if len(finite_x) == 1:  # one axis value of ours: widen to the published points so they are seen
            finite_x = sorted(set(finite_x) | {float(p.value) for p in published if _finite(p.value)})
        if axis in LOG_AXES and len(finite_x) > 1:
            ax.set_xscale("log", base=2 if axis == "l" else 10)
            _plain_ticks(ax, finite_x)
            ax.set_xlim(finite_x[0] / 1.3, finite_x[-1] * 1.3)
        elif len(finite_x) == 1:
            ax.set_xlim(finite_x[0] * 0.8, finite_x[0] * 1.2)
        ax.grid(True, which="both", alpha=0.3)
        if axis == "sigma":
            eps_cols = [c for c in agg.columns if c.startswith("epsilon_")]
            mix = agg[agg["axis_value"].map(_finite)].sort_values("axis_value")
            ax2 = ax.twinx()
            for j, col in enumerate(eps_cols):
                part = mix[mix[col].map(_finite)]
                if len(part):
                    (h,) = ax2.plot(
                        part["axis_value"],
                        part[col],
                        linestyle="--",
                        color=f"C{(j + 3) % 10}",
                        linewidth=1.8,
                        label=f"ε ({col.removeprefix('epsilon_')})",
                    )
                    handles.append(h)
            ax2.set_yscale("log")
            ax2.set_ylabel("ε (right axis, dashed)")
        if len(handles) > 5:  # many series: the legend goes beside the plot, not over the curves
            fig.set_size_inches(14, 5.6)
            ax.legend(
                handles=handles,
                labels=[h.get_label() for h in handles],
                loc="center left",
                bbox_to_anchor=(1.12 if axis == "sigma" else 1.01, 0.5),  # clear of the epsilon axis' label
                fontsize=10,
            )
        else:
            ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="best", fontsize=10)
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(title, 95 * ncols)), fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # a legend beside the plot is saved whole
    plt.close(fig)


CAVEATS = {"label-dp": " [labels only]", "dp-pca": " [projection only]"}


def combined_figure(tables: dict[str, tuple[pd.DataFrame, str | None]], path: Path) -> str:
    """Every private series of every finished sweep (the full protocol where it ran, else QUICK), accuracy vs its
    certified epsilon; a point whose runs all collapsed is listed as collapsed and not plotted."""
    tables = {k: v for k, v in tables.items() if not (k.endswith("-quick") and k.removesuffix("-quick") in tables)}
    fig, ax = plt.subplots(figsize=(11, 6.5))
    lines = ["| sweep | series | axis value | certified ε (accountant) | test acc. (%) |", "|---|---|---|---|---|"]
    markers = "osD^v<>ph*XP"
    k = 0
    for sweep, (agg, axis) in tables.items():
        base = sweep.removesuffix("-quick")
        for label, part in agg.groupby("label", sort=False):
            pts = []
            part = part.sort_values("axis_value")
            for (_, r), dead in zip(part.iterrows(), all_collapsed(part), strict=True):
                certified = r.get("certified_epsilon")  # the product's reading: results.certified_epsilon
                if certified is None or not _finite(certified) or "regression" in str(label):
                    continue
                ce = (float(certified), str(r.get("certified_by") or ""))
                if not dead:  # a point at the constant predictor is no result: listed as such, never plotted
                    pts.append((ce[0], 100 * r["test_accuracy_mean"]))
                lines.append(
                    f"| {sweep} | {label} | {_fmt(r['axis_value'], 4)} | {ce[0]:.3f} ({ce[1]}) | "
                    f"{accuracy_cell(r, bool(dead), spread=False)} |"
                )
            if not pts:
                continue
            pts.sort()
            tag = f"{base} (QUICK)" if sweep.endswith("-quick") else base
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker=markers[k % len(markers)],
                linewidth=1.5,
                markersize=7,
                color=plt.cm.tab20(k % 20),
                label=f"{tag}: {label}{CAVEATS.get(base, '')}",
            )
            k += 1
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0.1, 1, 10 rather than 10^-1, 10^0, 10^1
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("certified ε (smallest rigorous upper bound recorded; δ as configured per sweep)")
    ax.set_ylabel("test accuracy (%)")
    ax.grid(True, which="both", alpha=0.3)
    # the legend goes under the plot, in as many rows as the series need; the saved image grows to hold it and
    # the title (bbox_inches="tight"), so neither is cut at the figure's edge
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2, fontsize=9, frameon=False)
    ax.set_title("Full MNIST: every private series vs certified ε\n(full protocol where run, else QUICK)")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "\n".join(lines)


def pca_components_figure(data_dir: str, path: Path, *, seed: int = 0) -> str:
    """Item 7 (dp-stats poster): top-10 Analyze-Gauss components of all MNIST training images at eps = 10, 2, 0.1."""
    from dpmix_core.data import load_dataset
    from dpmix_core.teaching import pca_comparison

    ds = load_dataset("mnist", data_dir=data_dir)
    pca = pca_comparison(
        ds.x_train, epsilons=(10.0, 2.0, 0.1), num_components=10, delta=1e-5, max_samples=ds.n_train, seed=seed
    )
    imgs = pca.images()
    rows, k = imgs.shape[:2]
    fig, axes = plt.subplots(rows, k, figsize=(1.3 * k + 1.6, 1.4 * rows + 0.6), squeeze=False)
    for i, label in enumerate(pca.row_labels()):
        for j in range(k):
            ax = axes[i][j]
            lim = float(abs(imgs[i, j]).max()) or 1.0
            ax.imshow(imgs[i, j], cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"PC {j + 1}", fontsize=11)
        axes[i][0].set_ylabel(f"{label}\n{100 * pca.captured[i]:.0f} % var.", fontsize=9)
    fig.suptitle(
        f"Analyze-Gauss DP-PCA of all {pca.n_used:,} MNIST training images (δ = {pca.delta:g}, "
        f"rows clipped to the unit ball; noise seed {seed})",
        fontsize=12,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    table = pca.table()
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", default="results/repro.sqlite")
    p.add_argument("--out", default="docs/figures")
    p.add_argument("--sweeps", nargs="*", help="only these sweeps (default: all; the all-methods chart: --all-methods)")
    p.add_argument("--all-methods", action="store_true", help="redraw the all-methods chart from --sweeps too")
    p.add_argument("--data-dir", help="directory with mnist.npz: also draw the DP-PCA component grid (item 7)")
    p.add_argument(
        "--test-inputs",
        choices=TEST_INPUTS,
        help="read the sweeps' trained models through this test loader (default: each run's own); the figure's file "
        "name gets -TEST_INPUTS",
    )
    args = p.parse_args(argv)
    store = ResultStore(args.store)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tables: dict[str, tuple[pd.DataFrame, str | None]] = {}
    sweeps = list(DEFAULT_SWEEPS) if args.sweeps is None else args.sweeps
    for sweep in sweeps:
        if store.get_sweep(sweep) is None:
            print(f"## {sweep}\n\n_not in the store (pending)_\n")
            continue
        agg, axis, title = sweep_results(store, sweep, test_inputs=args.test_inputs)
        counts = run_counts(store, sweep)
        total = sum(counts.values())
        status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"## {sweep}\n\n{title}\n\nruns: {total} ({status})\n")
        if agg.empty:
            print("_no finished runs_\n")
            continue
        sigmas = sigma_by_group(store, sweep, axis, agg)
        published = sweep_published(store, sweep)
        if published:
            print("published vs ours:\n\n" + comparison_markdown(sweep_comparison(store, sweep, agg)) + "\n")
        print(markdown_table(agg, axis, sigmas) + "\n")
        if picks := sweep_best_axis(store, sweep, test_inputs=args.test_inputs):  # e.g. DPFMix Table 1's best m
            print(f"best {axis} per series:\n\n" + comparison_markdown(best_axis_table(picks)) + "\n")
        print(training_summary(store, sweep, axis) + "\n")
        path = out / (f"{sweep}-{args.test_inputs}.png" if args.test_inputs else f"{sweep}.png")
        figure(agg, axis, title, sweep, path, published)
        print(f"figure: {path}\n")
        tables[sweep] = (agg, axis)
    if args.data_dir:
        path = out / "dp-pca-components.png"
        print("## DP-PCA components (ε = 10, 2, 0.1)\n")
        print(pca_components_figure(args.data_dir, path) + "\n")
        print(f"figure: {path}\n")
    if tables and (args.sweeps is None or args.all_methods):  # a few sweeps would overwrite it with a part of it
        path = out / "all-methods-certified-eps.png"
        print("## all methods vs certified ε\n")
        print(combined_figure(tables, path) + "\n")
        print(f"figure: {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
