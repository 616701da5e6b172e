"""Every quick preset on the embedded sample, as an offline user runs them: exit code, wall time, runs, collapses.

    .venv/bin/python bench/quick_presets_embedded.py --store /tmp/quick-embedded.sqlite [--presets NAME ...]

Each preset runs as ``python -m dpmix_core sweep preset:NAME --dataset embedded --max-parallel 2`` (runs already in
the store are reused), then one markdown row per preset: the sweep command's exit code and wall time, the runs done,
how many collapsed (the model never learned: 4,000 training records cannot carry every paper's setting), the
non-private baseline's accuracy where the preset has one (issue #13: >= 90 % on the embedded sample), the median
and slowest run's own seconds, and the runs left out because the sample cannot make them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpmix_core.experiments.presets import PRESETS  # noqa: E402
from dpmix_core.runtime.store import ResultStore  # noqa: E402


def run_preset(name: str, store: Path) -> tuple[int, float, list[str]]:
    """(exit code, wall seconds, the 'left out' lines) of one quick preset's sweep on the embedded sample."""
    command = [sys.executable, "-m", "dpmix_core", "sweep", f"preset:{name}", "--dataset", "embedded"]
    command += ["--max-parallel", "2", "--store", str(store)]
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    left_out = [line for line in done.stderr.splitlines() if line.startswith("left out")]
    return done.returncode, time.perf_counter() - t0, left_out


def row(store: ResultStore, name: str, code: int, wall: float, left_out: list[str]) -> str:
    runs = store.list_runs(sweep=f"{name}@embedded", status="done")
    seconds = [float(r.result.get("seconds") or 0.0) for r in runs] or [0.0]
    collapsed = sum(bool(r.result.get("collapsed")) for r in runs)
    baseline = [r.result["test_accuracy"] for r in runs if r.config.get("method") == "non-private"]
    shown = ", ".join(f"{100 * a:.1f} %" for a in baseline) or "—"
    return (
        f"| {name} | {code} | {wall:.0f} | {len(runs)} | {collapsed} | {shown} | {statistics.median(seconds):.0f} | "
        f"{max(seconds):.0f} | {len(left_out)} |"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True, type=Path, help="results store for the sweeps (made if missing)")
    p.add_argument("--presets", nargs="+", help="quick presets to run (default: every one)")
    args = p.parse_args()
    names = args.presets or [name for name, spec in PRESETS.items() if spec.quick]
    unknown = [n for n in names if n not in PRESETS or not PRESETS[n].quick]
    if unknown:
        raise SystemExit(f"not a quick preset: {', '.join(unknown)}")
    results = {name: run_preset(name, args.store) for name in names}
    store = ResultStore(args.store)
    print(
        "| quick preset | exit | wall s | runs done | collapsed | non-private | median s/run | slowest s | left out |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for name, (code, wall, left_out) in results.items():
        print(row(store, name, code, wall, left_out))
    for name, (_, _, left_out) in results.items():
        for line in left_out:
            print(f"\n{name}: {line}")
    return 0 if all(code == 0 for code, _, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
