"""Issue #14: bad input gets one clear line and nothing is lost.

Drives the CLI (in-process through ``main(argv)``, plus a few subprocesses) with a table of bad
inputs and with hypothesis, and asserts for every refusal: exit code 2, exactly one stderr line, no
traceback, no file created or removed. Fault tests: a damaged / empty / unwritable store, a
killed sweep driver and worker, a misbehaving HTTP server on 127.0.0.1, uploads that try to
allocate far more than their size.
"""

from __future__ import annotations

import http.server
import io
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import fake_jobs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpmix_core.cli.main import main
from dpmix_core.data import DatasetError, load_user_data
from dpmix_core.data.base import ChecksumMismatchError
from dpmix_core.data.download import DownloadLimits, RemoteFile, fetch_files
from dpmix_core.resources.limits import LimitExceeded, Limits, check_mixing_cost, limits_from_env, parse_bytes
from dpmix_core.runtime.store import ResultStore, StoreError, store_problem

ROOT = Path(__file__).resolve().parents[1]
ACC = ["--n", "1000", "--l", "10", "--T", "100", "--delta", "1e-5"]
SIGMA = ["--sigma-x", "1", "--sigma-y", "1"]
SYN = ["synthesize", "--mechanism", "dpmix", "--l", "4", "--T", "20", "--sigma-x", "1"]


def _tree(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` with its size (folders: -1): what a refusal must leave unchanged."""
    return {str(p.relative_to(folder)): (-1 if p.is_dir() else p.lstat().st_size) for p in folder.rglob("*")}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with a few inputs, as the current directory; the store and data dir point inside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "store" / "results.sqlite"))
    monkeypatch.setenv("DPMIX_DATA_DIR", str(tmp_path / "no-data"))
    (tmp_path / "no-data").mkdir()
    (tmp_path / "card-dir.card.json").mkdir()
    (tmp_path / "folder").mkdir()
    (tmp_path / "bad.csv").write_bytes(b"label,a\n0,1e39\n1,0\n")
    (tmp_path / "labels.csv").write_bytes(b"label,a\n100000000000000000000,1\n200000000000000000000,0\n")
    (tmp_path / "pickled.npz").write_bytes(_pickled_npz())
    (tmp_path / "bomb.npz").write_bytes(_bomb_npz())
    (tmp_path / "empty.sqlite").write_bytes(b"")
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database " * 500)
    (tmp_path / "spec.toml").write_text("this is = not [valid toml\n")
    np.save(tmp_path / "x.npy", np.zeros((50, 4), dtype=np.uint8))
    np.save(tmp_path / "y.npy", np.zeros(50, dtype=np.int64))
    return tmp_path


def refused(capsys, workdir: Path, argv: list[str]) -> str:
    """Run the CLI in-process; assert the #14 contract for a refusal and return the line."""
    before = _tree(workdir)
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, (argv, code, out, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert _tree(workdir) == before, argv  # nothing created, nothing removed
    return lines[0]


RAY_MISSING = pytest.mark.skipif(
    __import__("importlib").util.find_spec("ray") is not None, reason="Ray is installed here"
)

CASES = [
    # argument types: one line each
    (
        ["epsilon", "--accountant", "lee2019", "--n", "abc", "--l", "1", "--T", "1", *SIGMA, "--delta", "1e-5"],
        "is not a number",
    ),
    (
        ["epsilon", "--accountant", "lee2019", "--n", "1.5", "--l", "1", "--T", "1", *SIGMA, "--delta", "1e-5"],
        "not a positive integer",
    ),
    (
        ["epsilon", "--accountant", "lee2019", "--n", "1e400", "--l", "1", "--T", "1", *SIGMA, "--delta", "1e-5"],
        "too large",
    ),
    (
        ["epsilon", "--accountant", "lee2019", "--n", "nan", "--l", "1", "--T", "1", *SIGMA, "--delta", "1e-5"],
        "not a finite number",
    ),
    (["epsilon", "--accountant", "lee2019", *ACC, "--sigma-x", "inf", "--sigma-y", "1"], "not a finite number"),
    (["epsilon", "--accountant", "nope", *ACC, *SIGMA], "unknown accountant"),
    (["epsilon", "--accountant", "lee2019", *ACC], "required"),
    (["epsilon", "--accountant", "rdp-wor", *ACC, *SIGMA, "--label-may-change"], "--label-may-change"),
    (["epsilon", "--accountant", "rdp-wor", *ACC, *SIGMA, "--classes", "7"], "equal classes"),
    (["nonsense"], "invalid choice"),
    # synthesize: output paths checked before any work; the cost model before any allocation
    ([*SYN, "--out", "rel.parquet"], "must end in .npz or .csv"),
    ([*SYN, "--out", "missing/rel.npz"], "does not exist"),
    ([*SYN, "--out", "card-dir.npz"], "privacy card"),
    ([*SYN, "--out", "folder"], "must end in .npz or .csv"),
    (
        ["synthesize", "--mechanism", "dpmix", "--l", "4", "--T", "1e9", "--sigma-x", "1", "--out", "r.npz"],
        "DPMIX_MAX_MEMORY",
    ),
    (
        ["synthesize", "--mechanism", "dpmix", "--l", "5000", "--T", "10", "--sigma-x", "1", "--out", "r.npz"],
        "must not exceed",
    ),
    ([*SYN, "--data-file", "nothing.csv", "--out", "r.npz"], "cannot read the data file"),
    ([*SYN, "--data-file", "bad.csv", "--out", "r.npz"], "beyond the float32 range"),
    ([*SYN, "--data-file", "labels.csv", "--out", "r.npz"], "too large to be told apart"),
    ([*SYN, "--data-file", "pickled.npz", "--out", "r.npz"], "not a plain numpy array"),
    ([*SYN, "--data-file", "bomb.npz", "--out", "r.npz"], "once decompressed"),
    (
        [*SYN, "--memmap", "x.npy", "--labels", "y.npy", "--num-classes", "2", "--T", "1e15", "--out", "rel"],
        "DPMIX_MAX_JOB_SECONDS",
    ),
    ([*SYN, "--memmap", "nothing.npy", "--labels", "y.npy", "--num-classes", "2", "--out", "rel"], "cannot memory-map"),
    ([*SYN, "--memmap", "x.npy", "--labels", "y.npy", "--num-classes", "2", "--out", "folder"], "exists"),
    # train: everything refused before the first progress line
    (["train", "--sigma-x", "1", "--epochs", "1e9"], "DPMIX_MAX_JOB_SECONDS"),
    (["train", "--sigma-x", "1", "--l", "4", "--T", "1e9"], "DPMIX_MAX_MEMORY"),
    (["train", "--sigma-x", "1", "--l", "5000"], "must not exceed"),
    (["train", "--data-file", "bad.csv"], "beyond the float32 range"),
    (["train", "--data-file", "nothing.csv"], "cannot read the data file"),
    (["train", "--test-fraction", "0.3"], "--test-fraction: only with --data-file"),
    (["sweep", "spec.toml", "--feature-range", "0,1"], "--feature-range: only with --data-file"),
    (["train", "--data-file", "pickled.npz", "--label-column", "y"], "names a column of a --data-file CSV"),
    (["train", "--method", "dp-sgd"], "target epsilon"),
    # sweep: paths, Ray and the store checked before any work
    (["sweep", "spec.toml", "--export", "folder"], "is a folder"),
    (["sweep", "spec.toml", "--export", "missing/out.csv"], "does not exist"),
    (["sweep", "spec.toml"], "spec"),
    (["sweep", "no-such-spec.toml"], "no-such-spec.toml"),
    (["sweep", "preset:nope"], "nope"),
    (["sweep", "preset:thesis-4.1-quick", "--repeats", "1e6"], "DPMIX_MAX_RUNS"),
    (["sweep", "preset:thesis-4.1-quick", "--store", "empty.sqlite"], "empty (0-byte) file"),
    (["sweep", "preset:thesis-4.1-quick", "--store", "garbage.sqlite"], "is damaged"),
    (["sweep", "preset:thesis-4.1-quick", "--store", "folder"], "is a folder"),
    (["sweep", "preset:thesis-4.1-quick", "--address", "auto"], "--address needs --backend ray"),
    pytest.param(["sweep", "preset:thesis-4.1-quick", "--backend", "ray"], "needs Ray", marks=RAY_MISSING),
    # audit: the cost model in front of the simulation
    (["audit", "--mechanism", "dpmix", "--n", "100", "--l", "4", "--T", "1e9", *SIGMA], "DPMIX_MAX_SECONDS"),
    (
        ["audit", "--mechanism", "dpmix", "--n", "100", "--l", "4", "--T", "10", *SIGMA, "--trials", "1e12"],
        "DPMIX_MAX_SECONDS",
    ),
    (["audit", "--mechanism", "dpmix", "--n", "100", "--l", "4", "--T", "10", *SIGMA, "--trials", "10"], "at least 20"),
    (["audit", "--mechanism", "dpmix", "--n", "5", "--l", "9", "--T", "10", *SIGMA], "must not exceed"),
    (["calibrate", "--accountant", "lee2019", *ACC, "--target-epsilon", "nan"], "not a finite number"),
]


@pytest.mark.parametrize(("argv", "message"), CASES)
def test_bad_input_is_one_line_exit_2_and_touches_no_file(capsys, workdir, argv, message):
    line = refused(capsys, workdir, argv)
    assert message in line


@given(
    value=st.one_of(
        st.text(max_size=12),
        st.integers(-10, 10**20).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
    ),
    option=st.sampled_from(["--n", "--l", "--T", "--delta", "--dx", "--classes"]),
    accountant=st.sampled_from(["lee2019", "dpcda", "rdp-wor"]),
)
def test_any_value_of_a_numeric_option_is_answered_or_refused_in_one_line(value, option, accountant):
    argv = {"--n": "1000", "--l": "10", "--T": "100", "--delta": "1e-5"}
    argv[option] = value
    cmd = ["epsilon", "--accountant", accountant, *SIGMA, *[x for kv in argv.items() for x in kv]]
    out_buf, err_buf = io.StringIO(), io.StringIO()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out_buf, err_buf
    try:
        code = main(cmd)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    err = err_buf.getvalue()
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert len(err.splitlines()) == 1 and err.startswith("error: ")


def test_debug_flag_shows_the_traceback_and_still_exits_2(capsys, workdir):
    assert main(["--debug", *SYN, "--out", "missing/rel.npz"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["epsilon", "--accountant", "lee2019", "--n", "abc", "--l", "1", "--T", "1", *SIGMA, "--delta", "1e-5"],
            "is not a number",
        ),
        (["sweep", "preset:thesis-4.1-quick", "--store", "garbage.sqlite"], "is damaged"),
        (["audit", "--mechanism", "dpmix", "--n", "100", "--l", "4", "--T", "1e9", *SIGMA], "DPMIX_MAX_SECONDS"),
    ],
)
def test_subprocess_refusals(workdir, argv, message):
    before = _tree(workdir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "dpmix_core", *argv], capture_output=True, text=True, env=env, cwd=workdir, timeout=120
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and message in proc.stderr
    assert _tree(workdir) == before


# --------------------------------------------------------------------------- files: nothing lost or half-written


def test_release_and_card_are_written_together_with_the_umask(capsys, workdir):
    old = os.umask(0o022)
    try:
        assert main([*SYN, "--out", "rel.npz"]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    for name in ("rel.npz", "rel.card.json"):
        assert (workdir / name).stat().st_mode & 0o777 == 0o644
    assert not [p for p in workdir.iterdir() if p.name.startswith(".rel")]  # no temporaries left


def test_streaming_never_removes_a_partial_folder_or_symlink_it_did_not_create(capsys, workdir):
    (workdir / "rel.partial").mkdir()
    (workdir / "rel.partial" / "mine.txt").write_text("precious")
    (workdir / "link.partial").symlink_to(workdir / "rel.partial")
    for out in ("rel", "link"):
        assert main([*SYN, "--memmap", "x.npy", "--labels", "y.npy", "--num-classes", "2", "--out", out]) == 0
    capsys.readouterr()
    assert (workdir / "rel.partial" / "mine.txt").read_text() == "precious"
    assert (workdir / "link.partial").is_symlink()
    assert sorted(p.name for p in (workdir / "rel").iterdir()) == ["card.json", "x.npy", "y.npy"]


def test_streaming_failure_removes_only_its_own_temporary(workdir, monkeypatch):
    from dpmix_core.synthesis import streaming

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(streaming.np.lib.format, "open_memmap", fail)
    before = _tree(workdir)
    with pytest.raises(OSError):
        streaming.synthesize_streaming(
            np.load("x.npy"), np.load("y.npy"), num_classes=2, l=2, T=10, sigma_x=1.0, out_path=workdir / "rel"
        )
    assert _tree(workdir) == before


# --------------------------------------------------------------------------- store faults


def _damaged_store(path: Path) -> None:
    store = ResultStore(path)
    store.submit_many([("fake_jobs:quick", {"i": i, "pad": "z" * 500}, None) for i in range(300)])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # a 4 KB page overwritten mid-file
        fh.seek(size // 2 // 4096 * 4096)
        fh.write(os.urandom(4096))


def test_a_page_overwritten_mid_file_is_one_line_naming_the_store(capsys, workdir):
    _damaged_store(workdir / "damaged.sqlite")
    with pytest.raises(StoreError, match="damaged.sqlite is damaged"):
        ResultStore(workdir / "damaged.sqlite").list_runs()


def test_an_empty_file_that_another_process_is_initialising_is_not_refused(tmp_path):
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"")

    def initialise():
        time.sleep(0.2)
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()

    thread = threading.Thread(target=initialise)
    thread.start()
    store = ResultStore(path)
    thread.join()
    assert store.list_runs() == []


def test_unwritable_store_folder_is_one_line(tmp_path, monkeypatch):
    import dpmix_core.runtime.store as store_module

    def cannot_open(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(store_module.sqlite3, "connect", cannot_open)
    with pytest.raises(StoreError, match="make its folder .* writable"):
        ResultStore(tmp_path / "r.sqlite")
    assert store_problem(tmp_path / "r.sqlite", sqlite3.IntegrityError("UNIQUE")) is None  # not a file problem


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_store_folder_for_real(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="ro"):
            ResultStore(folder / "r.sqlite")
    finally:
        folder.chmod(0o755)


def test_killed_driver_and_worker_resume_in_one_rerun(tmp_path):
    """kill -9 of the sweep driver and of its worker; the first re-run completes the sweep."""
    from dpmix_core.experiments.sweeps import run_sweep

    path = tmp_path / "r.sqlite"
    ResultStore(path)
    marker = tmp_path / "marker"
    runs = [("fake_jobs:slow", {"x": 1, "epochs": 40, "step_s": 0.1, "marker": str(marker)}, None)]
    script = (
        "import sys, fake_jobs\nfrom dpmix_core.runtime.store import ResultStore\n"
        "from dpmix_core.experiments.sweeps import run_sweep\n"
        f"s = ResultStore({str(path)!r})\n"
        f"run_sweep(s, 'killed', {runs!r}, backend=fake_jobs.backend(s), poll_s=0.05)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(fake_jobs.TESTS_DIR)])}
    driver = subprocess.Popen([sys.executable, "-c", script], env=env)
    store = ResultStore(path)
    try:
        run = fake_jobs.wait_for(lambda: next(iter(store.list_runs(status="running")), None), timeout=60)
        fake_jobs.wait_for(lambda: store.get(run.id).pid, timeout=30)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        os.kill(store.get(run.id).pid, signal.SIGKILL)
        time.sleep(0.2)
        quicker = [("fake_jobs:slow", runs[0][1], None)]
        summary = run_sweep(store, "killed", quicker, backend=fake_jobs.backend(store), poll_s=0.05, timeout_s=60)
        assert summary.ok and summary.requeued == 1 and fake_jobs.executions(marker) == 1
    finally:
        fake_jobs.kill_leftovers(store)


# --------------------------------------------------------------------------- uploads


def _pickled_npz() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x.npy", pickle.dumps(np.zeros((3, 2))))
        zf.writestr("y.npy", pickle.dumps(np.zeros(3)))
    return buf.getvalue()


def _bomb_npz() -> bytes:
    """A few KB on disk whose x.npy header declares 2.4 GB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("x.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (100_000, 3000)})
            fh.write(bytes(1 << 16))
        y = io.BytesIO()
        np.save(y, np.zeros(100_000))
        zf.writestr("y.npy", y.getvalue())
    return buf.getvalue()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("p.npz", _pickled_npz(), "not a plain numpy array"),
        ("b.npz", _bomb_npz(), "once decompressed"),
        ("f.npz", _npz(x=np.array([[1e39, 0.0], [0.0, 0.0]]), y=np.array([0, 1])), "x row 0, column 0: 1e+39"),
        ("l.npz", _npz(x=np.zeros((2, 2)), y=np.array([1e20, 2e20])), "y[0]: label 1e+20 is too large"),
        ("u.npz", _npz(x=np.zeros((2, 2)), y=np.array([0, 2**64 - 1], dtype=np.uint64)), "does not fit"),
        ("o.npz", _npz(x=np.array([None, 1]), y=np.array([0, 1])), "holds Python objects"),
        ("c.csv", b"label,a\n0,1e39\n1,0\n", "row 2, column 'a': 1e+39 is beyond the float32 range"),
        ("u.csv", b"label,a\n18446744073709551615,1\n0,0\n", "does not fit"),
        ("w.csv", ("label," + ",".join(f"c{i}" for i in range(200_000)) + "\n").encode(), "columns, more than"),
        ("t.csv", b"label,a,b,c,d\n" + b"0,1,2,3,4\n" * 20, "cells"),
    ],
)
def test_uploads_are_bounded_before_they_are_read(name, data, message):
    kwargs = {"max_rows": 10**7} if name == "t.csv" else {}
    if name == "t.csv":
        import dpmix_core.data.user as user

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(user, "MAX_CELLS", 50)
            with pytest.raises(DatasetError, match="cells"):
                load_user_data(data, name, **kwargs)
        return
    t0 = time.perf_counter()
    with pytest.raises(DatasetError) as info:
        load_user_data(data, name)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert time.perf_counter() - t0 < 5


def test_official_gzip_files_are_bounded_when_decompressed(tmp_path, monkeypatch):
    import gzip

    from dpmix_core.data import formats

    monkeypatch.setattr(formats, "MAX_OFFICIAL_FILE_BYTES", 1000)
    for name in formats.IDX_FILES:
        (tmp_path / name).write_bytes(gzip.compress(bytes(100_000)))
    with pytest.raises(DatasetError, match="decompresses to more than 1,000 bytes"):
        formats.read_idx_folder(tmp_path)


@given(data=st.binary(max_size=400), suffix=st.sampled_from([".csv", ".npz"]))
def test_random_upload_bytes_raise_only_dataset_errors(data, suffix):
    try:
        load_user_data(data, f"u{suffix}")
    except DatasetError as exc:
        assert "\n" not in str(exc)


# --------------------------------------------------------------------------- downloads (127.0.0.1 only)


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    mode = "oversize"

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        try:
            if self.mode == "oversize":
                for _ in range(64):
                    self.wfile.write(b"x" * 65536)
            else:  # a trickle: one byte every 0.3 s
                for _ in range(100):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.3)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def misbehaving():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_download_stops_at_the_expected_size_and_cleans_up(misbehaving, tmp_path):
    _Misbehaving.mode = "oversize"
    dest = tmp_path / "cache" / "new-folder"
    with pytest.raises(ChecksumMismatchError, match="more than the expected 1,000 bytes"):
        fetch_files([RemoteFile("f.bin", "0" * 64, 1000)], f"http://127.0.0.1:{misbehaving.server_port}/", dest)
    assert not dest.exists() and not (tmp_path / "cache").exists()  # folders it created, removed again


def test_a_trickling_server_is_abandoned_at_the_minimum_rate(misbehaving, tmp_path):
    _Misbehaving.mode = "trickle"
    limits = DownloadLimits(timeout_s=5, deadline_s=3, min_rate=100, grace_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="below the minimum"):
        fetch_files(
            [RemoteFile("f.bin", "0" * 64, 1000)],
            f"http://127.0.0.1:{misbehaving.server_port}/",
            tmp_path,
            limits=limits,
        )
    assert time.monotonic() - t0 < 5 and list(tmp_path.iterdir()) == []


def test_a_killed_download_leaves_no_part_file_behind(misbehaving, tmp_path):
    _Misbehaving.mode = "oversize"
    stale = tmp_path / ".f.bin.abc123.part"
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))  # from a download killed long ago
    with pytest.raises(ChecksumMismatchError):
        fetch_files([RemoteFile("f.bin", "0" * 64, 10)], f"http://127.0.0.1:{misbehaving.server_port}/", tmp_path)
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the cost model


def test_limits_come_from_the_environment_and_refuse_in_one_line():
    assert limits_from_env({}) == Limits()
    limits = limits_from_env({"DPMIX_MAX_MEMORY": "512M", "DPMIX_MAX_SECONDS": "5"})
    assert limits.max_memory == 512 * 2**20 and limits.max_seconds == 5
    assert parse_bytes("2GiB") == 2 * 2**30 and parse_bytes("1e9") == 10**9
    for bad in ("lots", "-1", "0"):
        with pytest.raises(ValueError, match="DPMIX_MAX_MEMORY"):
            parse_bytes(bad)
    with pytest.raises(LimitExceeded, match=r"DPMIX_MAX_MEMORY\): lower T or l"):
        check_mixing_cost(T=10**9, l=4, d=784, k=10, limits=limits)
    with pytest.raises(LimitExceeded, match="DPMIX_MAX_SECONDS"):
        check_mixing_cost(T=10**5, l=10**4, d=784, k=10, limits=limits)
    assert check_mixing_cost(T=10_000, l=256, d=784, k=10).seconds < Limits().max_seconds


# --------------------------------------------------------------------------- page functions


@given(text=st.one_of(st.none(), st.text(max_size=8), st.integers(-5, 10**20).map(str)))
def test_any_sweep_in_the_address_is_a_sweep_or_one_line(text):
    import tempfile

    from dpmix_core.experiments.trade_offs import sweep_id_from_query

    with tempfile.TemporaryDirectory() as folder:
        store = ResultStore(Path(folder) / "r.sqlite")
        sweep = store.create_sweep("s")
        try:
            found = sweep_id_from_query(store, text)
        except ValueError as exc:
            assert "\n" not in str(exc) and "?sweep=" in str(exc)
        else:
            assert found in (None, sweep.id)


@given(T=st.integers(1, 10**12), l=st.integers(1, 10**7), epochs=st.integers(1, 10**9), repeats=st.integers(1, 10**6))
def test_any_custom_sweep_is_accepted_or_refused_in_one_line_before_its_runs_are_built(T, l, epochs, repeats):
    from dpmix_core.experiments.trade_offs import custom_spec, spec_problem

    t0 = time.perf_counter()
    try:
        spec = custom_spec(
            mechanisms=("dpmix",),
            axis="sigma",
            values=(0.5, 1.0),
            repeats=repeats,
            model="linear",
            loss="ce",
            epochs=epochs,
            l=l,
            T=T,
            sigma=1.0,
            accountant="rdp-wor",
            delta=1e-5,
            dataset="embedded",
        )
    except LimitExceeded as exc:
        problem = str(exc)
    else:
        problem = spec_problem(spec)
    assert time.perf_counter() - t0 < 2  # the page reruns this on every widget change
    assert problem is None or ("\n" not in problem and "DPMIX_MAX_" in problem)
    if T * l > 10**11 or epochs * T > 10**11 or repeats > 2500:
        assert problem is not None


@pytest.mark.parametrize("sigma, expected", [("1e308", "0.0000"), ("1e-300", "inf")])
def test_extreme_noise_is_answered_with_a_reason_not_a_traceback(sigma, expected, capsys):
    """Every accountant answers: eps = 0 for astronomically large noise, inf for vanishing noise, with the reason."""
    code = main(["epsilon", "--accountant", "all", *ACC, "--sigma-x", sigma, "--sigma-y", sigma])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "Traceback" not in out
    lines = [line for line in out.splitlines() if " eps=" in line]
    assert len(lines) == 6 and all(expected in line for line in lines)
    assert out.count("note:") == 6


def test_vanishing_noise_prints_no_numpy_warning(capsys):
    """pld-poisson at sigma_y = 1e-12 (z ~ 1e-12): dp_accounting's PLD construction overflowed e^(eps + log Phi) and
    numpy printed a RuntimeWarning above the answer (and above max-points' one-line error); the answer itself, the
    rdp-poisson / unsampled fallback, was right. Warnings as errors: any such warning fails the command."""
    import warnings

    argv = ["--n", "60000", "--l", "2", "--sigma-x", "1e-6", "--sigma-y", "1e-12", "--delta", "1e-5"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code = main(["epsilon", "--accountant", "pld-poisson", "--T", "1", *argv])
        out, err = capsys.readouterr()
        assert code == 0 and err == "" and "PLD failed (OverflowError" in out
        code = main(["max-points", "--accountant", "all", "--target-epsilon", "1e6", *argv])
        out, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: no accountant has an answer")


def test_the_papers_own_releases_pass_the_default_cost_model():
    """The limits refuse work too big for the machine, never the releases the papers made (thesis §4.1 / DPFMix)."""
    from dpmix_core.resources.limits import check_cost, limits_from_env, mixing_cost

    limits = limits_from_env({})
    for T, l in ((10000, 256), (60000, 256), (60000, 64)):
        check_cost(mixing_cost(T=T, l=l, d=784, k=10, n=60000), limits, change="T or l")  # interactive: no raise
