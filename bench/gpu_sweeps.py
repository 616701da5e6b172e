"""Several sweeps at once on one lent GPU machine, inside one call's time (issue #13).

Each job is ``NAME:SWEEP ARGS`` (the arguments split like a shell line, so a series name with spaces is
quoted): it runs ``python -m dpmix_core sweep ARGS --store DIR/NAME.sqlite`` (each pool worker gets cores //
``--max-parallel`` threads, as the sweep decides). At ``--budget-s`` seconds every sweep still running is stopped (SIGTERM, then its pool workers:
their runs become ``failed`` with their checkpoints kept beside the store, so a later call resumes them with
``--retry-failed``), and each store is copied with SQLite's backup into ``--out`` together with a log of the
GPU's utilisation (``nvidia-smi``, every ``--sample-s`` seconds), all in one ``--bundle`` file (the device
tool brings back at most 8 files). A store already in DIR (a warm machine's, or one carried and copied there)
is resumed, not replaced.

    python bench/gpu_sweeps.py --budget-s 520 --out "$OUT" \
        "p:preset:dpfmix-table1 --series 'Poisson / gdp-clt' --values 1 --seeds 1 2" \
        "c:preset:dpcda-table2 --series 'eps = 10' --repeats 10 --max-parallel 10"
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path


def parse_job(text: str) -> tuple[str, list[str]]:
    """``NAME:ARGS`` -> (name, sweep arguments)."""
    name, _, args = text.partition(":")
    if not name.isidentifier() or not args.strip():
        raise SystemExit(f"job {text!r}: expected NAME:SWEEP ARGS")
    return name, shlex.split(args)


def gpu_sample() -> str:
    """One line of the GPU's utilisation and memory, or why not."""
    query = "--query-gpu=utilization.gpu,utilization.memory,memory.used,power.draw"
    try:
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi: {type(exc).__name__}"
    return out.stdout.strip() or out.stderr.strip()


def backup(store: Path, out: Path) -> str:
    """Copy a (possibly live) store with SQLite's backup and summarise its runs."""
    src = sqlite3.connect(store)
    dst = sqlite3.connect(out)
    src.backup(dst)
    rows = src.execute("select status, count(*) from runs group by status").fetchall()
    src.close()
    dst.close()
    return ", ".join(f"{status} {count}" for status, count in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jobs", nargs="+", help="NAME:SWEEP ARGS")
    parser.add_argument("--budget-s", type=float, default=520.0, help="stop every sweep after this many seconds")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gs"), help="where the stores live")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    parser.add_argument("--bundle", default="results.tar.gz", help="file name of the bundle under --out")
    parser.add_argument("--sample-s", type=float, default=15.0, help="seconds between GPU samples")
    args = parser.parse_args()
    jobs = [parse_job(j) for j in args.jobs]
    args.dir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for name, sweep_args in jobs:
        store = args.dir / f"{name}.sqlite"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "dpmix_core", "sweep", *sweep_args, "--store", str(store)]
        log = open(args.dir / f"{name}.log", "wb")  # noqa: SIM115 (the sweep writes it until it ends)
        procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        print(f"[{time.monotonic() - start:5.0f} s] {name}: {shlex.join(cmd[1:])}", flush=True)
    util = open(args.dir / "gpu_util.log", "a")  # noqa: SIM115
    next_sample = 0.0
    while any(p.poll() is None for p in procs.values()) and time.monotonic() - start < args.budget_s:
        now = time.monotonic() - start
        if now >= next_sample:
            util.write(f"{now:6.0f} s  running {sum(p.poll() is None for p in procs.values())}  {gpu_sample()}\n")
            util.flush()
            next_sample = now + args.sample_s
        time.sleep(1.0)
    for name, proc in procs.items():
        if proc.poll() is None:
            print(f"[{time.monotonic() - start:5.0f} s] {name}: budget spent, stopping", flush=True)
            os.killpg(proc.pid, signal.SIGTERM)
    if any(p.poll() is None for p in procs.values()):
        time.sleep(3.0)
        subprocess.run(["pkill", "-TERM", "-f", "dpmix_core.cli.worker"], check=False)
        time.sleep(5.0)
    for proc in procs.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    util.close()
    bundle = args.out / args.bundle
    with tarfile.open(bundle, "w:gz") as tar:
        for name, proc in procs.items():
            store = args.dir / f"{name}.sqlite"
            copy = args.dir / f"{name}.copy.sqlite"
            summary = backup(store, copy) if store.exists() else "no store"
            print(f"{name}: exit {proc.returncode}; runs: {summary}", flush=True)
            tar.add(copy, arcname=f"{name}.sqlite")
            tar.add(args.dir / f"{name}.log", arcname=f"{name}.log")
            logs = args.dir / f"{name}-logs"
            if logs.is_dir():
                for f in sorted(logs.glob("*.log")):
                    tar.add(f, arcname=f"{name}-logs/{f.name}")
        tar.add(args.dir / "gpu_util.log", arcname="gpu_util.log")
    print(f"total {time.monotonic() - start:.0f} s; {bundle} {bundle.stat().st_size} bytes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
