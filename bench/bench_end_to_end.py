"""Benchmark: the whole ``synthesize`` command as a user runs it (issue #16), hyperfine style.

Each repeat is a fresh ``python -m dpmix_core synthesize ...`` process timed from the outside
(wall clock: interpreter start, imports, dataset load, mixing, the card's epsilons, writing the
release), after one untimed warm-up run (it fills the decoded-dataset cache and the OS page
cache, as any second run on a laptop would). Reports the median, min and max of N repeats and
the load average before and after, because the reference machine is shared.

Two commands, both on full MNIST (n = 60,000, d = 784), DPMix, l = 256, T = 60,000:

* ``in-memory``: ``--dataset mnist --data-dir DIR --out r.npz`` (the .npz and its card);
* ``--memmap``: the same training images as ``X.npy`` / ``Y.npy``, streamed to a release folder.

Command: ``.venv/bin/python bench/bench_end_to_end.py --data-dir /path/to/folder/with/mnist.npz``
(``--repeats 5`` by default; ``--only in-memory`` or ``--only memmap``). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTING = ["--mechanism", "dpmix", "--l", "256", "--T", "60000", "--sigma-x", "0.1", "--sigma-y", "0.1"]


def commands(data_dir: str, tmp: Path, device: str | None = None) -> dict[str, tuple[list[str], Path]]:
    """name -> (argv after 'python -m dpmix_core', output path to delete between runs)."""
    npz = tmp / "r.npz"
    folder = tmp / "rel"
    setting = SETTING + (["--device", device] if device else [])
    return {
        "in-memory": (["synthesize", "--dataset", "mnist", "--data-dir", data_dir, *setting, "--out", str(npz)], npz),
        "memmap": (
            [
                "synthesize",
                "--memmap",
                str(tmp / "X.npy"),
                "--labels",
                str(tmp / "Y.npy"),
                "--num-classes",
                "10",
                *setting,
                "--out",
                str(folder),
            ],
            folder,
        ),
    }


def write_memmap_source(data_dir: str, tmp: Path) -> None:
    """The MNIST training split as X.npy (60000, 784) uint8 and Y.npy (60000,) for --memmap."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from dpmix_core.data import load_dataset

    ds = load_dataset("mnist", data_dir=data_dir, download=False)
    np.save(tmp / "X.npy", np.ascontiguousarray(ds.x_train.reshape(ds.n_train, -1)))
    np.save(tmp / "Y.npy", np.asarray(ds.y_train))


def run_once(argv: list[str], out: Path) -> float:
    if out.is_dir():
        shutil.rmtree(out)
    for path in (out, out.with_suffix(".card.json")):
        if path.is_file():
            path.unlink()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "dpmix_core", *argv], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder with mnist.npz (or the IDX files)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=["in-memory", "memmap"])
    parser.add_argument("--device", help="passed to synthesize (cpu, cuda, auto); default: the command's own")
    parser.add_argument("--tmp", help="scratch folder (default: a new temporary folder, deleted at the end)")
    args = parser.parse_args()

    tmp = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="dpmix-e2e-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        cmds = commands(args.data_dir, tmp, args.device)
        names = [args.only] if args.only else list(cmds)
        if "memmap" in names:
            write_memmap_source(args.data_dir, tmp)
        rows = []
        for name in names:
            argv, out = cmds[name]
            load0 = os.getloadavg()[0]
            run_once(argv, out)  # warm-up: decoded-dataset cache, page cache
            times = [run_once(argv, out) for _ in range(args.repeats)]
            rows.append((name, times, load0, os.getloadavg()[0], argv))
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.repeats} repeats after one warm-up\n")
        print("| command | median wall (s) | min | max | load avg before / after |")
        print("|---|---:|---:|---:|---|")
        for name, times, l0, l1, _ in rows:
            print(
                f"| {name} | {statistics.median(times):.2f} | {min(times):.2f} | {max(times):.2f} | "
                f"{l0:.2f} / {l1:.2f} |"
            )
        print()
        for name, *_, argv in rows:
            print(f"{name}: python -m dpmix_core {' '.join(argv)}")
    finally:
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
