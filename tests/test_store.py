"""The SQLite results store: schema, idempotent submit, atomic claims, concurrent writers, staleness,
conditional worker writes, results and CSV export, sweeps."""

import csv
import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import fake_jobs
import numpy as np
import pytest

from dpmix_core.runtime.store import (
    SCHEMA_VERSION,
    ResultStore,
    StoreError,
    config_key,
    default_store_path,
    stale_message,
)

KIND = "fake_jobs:quick"


@pytest.fixture
def store(tmp_path):
    return ResultStore(tmp_path / "results.sqlite")


def _mp():
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def test_schema_wal_and_version(store, tmp_path):
    assert store.journal_mode() == "wal"
    assert store.schema_version() == SCHEMA_VERSION
    again = ResultStore(store.path)  # reopening is a no-op
    assert again.schema_version() == SCHEMA_VERSION and again == store
    conn = sqlite3.connect(store.path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="schema version"):
        ResultStore(store.path)


def test_default_path_env_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMIX_STORE", str(tmp_path / "env" / "r.sqlite"))
    assert default_store_path() == tmp_path / "env" / "r.sqlite"
    assert ResultStore().path == tmp_path / "env" / "r.sqlite" and (tmp_path / "env").is_dir()
    monkeypatch.delenv("DPMIX_STORE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".cache" / "dpmix" / "results.sqlite"


def test_submit_is_idempotent_by_key(store):
    a = store.submit(KIND, {"x": 1, "y": [1, 2]})
    b = store.submit(KIND, {"y": [1, 2], "x": 1})  # same config, other key order
    assert a.id == b.id and a.key == config_key({"x": 1, "y": [1, 2]}) and a.status == "queued"
    c = store.submit(KIND, {"x": 1, "y": [1, 2]}, key="explicit")
    assert c.id != a.id and c.key == "explicit"
    assert store.submit(KIND, {"x": np.float64(2.5), "v": np.arange(2)}).config == {"x": 2.5, "v": [0, 1]}
    with pytest.raises(ValueError, match="module:function"):
        store.submit("not-a-callable-path", {})
    with pytest.raises(ValueError, match="different kinds"):  # never another job's result
        store.submit("fake_jobs:crash", {"x": 1, "y": [1, 2]})


def test_done_reused_failed_requeued_only_when_asked(store):
    run = store.submit(KIND, {"x": 1})
    store.claim(run.id, pid=1)
    assert store.finish(run.id, {"acc": 0.5}, pid=1)
    for requeue in (False, True):  # a done run is never re-queued
        again = store.submit(KIND, {"x": 1}, requeue=requeue)
        assert again.status == "done" and again.result == {"acc": 0.5}
    bad = store.submit(KIND, {"x": 2})
    store.claim(bad.id, pid=2)
    assert store.fail(bad.id, "ValueError: boom\n\ntraceback...", pid=2)
    assert store.submit(KIND, {"x": 2}).status == "failed"
    assert store.submit(KIND, {"x": 2}, requeue=["interrupted"]).status == "failed"
    requeued = store.submit(KIND, {"x": 2}, requeue=True)
    assert requeued.status == "queued" and requeued.error is None and requeued.id == bad.id
    pairs = store.submit_many([(KIND, {"x": 1}, None), (KIND, {"x": 3}, None), (KIND, {"x": 3}, None)])
    assert [o for _, o in pairs] == ["existing", "new", "existing"] and pairs[1][0].id == pairs[2][0].id


def test_claim_is_atomic_across_processes(store):
    run = store.submit(KIND, {"x": 1})
    with _mp().Pool(4) as pool:
        wins = pool.starmap(fake_jobs.race_claim, [(str(store.path), run.id)] * 8)
    assert sum(wins) == 1
    winners = []
    threads = [threading.Thread(target=lambda: winners.append(store.claim(pid=7))) for _ in range(8)]
    other = store.submit(KIND, {"x": 2})
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [w.id for w in winners if w is not None] == [other.id]
    assert store.get(other.id).attempts == 1


def test_claim_respects_max_running(store):
    for x in range(5):
        store.submit(KIND, {"x": x})
    claimed = [store.claim(backend="local", host="h", max_running=2) for _ in range(4)]
    assert [c is not None for c in claimed] == [True, True, False, False]
    assert store.claim(backend="local", host="other-host", max_running=2) is not None  # per host
    assert store.claim(backend="ray", max_running=2) is None  # queued runs are tagged local


def test_concurrent_writers_leave_every_row_consistent(store):
    for x in range(12):
        store.submit(KIND, {"x": x})
    t0 = time.monotonic()
    with _mp().Pool(4) as pool:
        claimed = pool.starmap(fake_jobs.claim_and_write, [(str(store.path), 25)] * 4)
    assert time.monotonic() - t0 < 20
    flat = [i for ids in claimed for i in ids]
    assert sorted(flat) == sorted({r.id for r in store.list_runs()}) and len(flat) == 12  # each claimed once
    for run in store.list_runs():
        assert run.status == "done" and run.error is None
        assert run.result["by"] == run.pid == run.progress["by"] and run.result["x"] == run.config["x"]
        assert run.progress["step"] == 24 and run.result["writes"] == 25
    assert store.integrity_check() == "ok"
    assert store.counts()["done"] == 12


def test_worker_writes_are_conditional_on_ownership(store):
    run = store.submit(KIND, {"x": 1})
    store.claim(run.id, pid=100)
    assert not store.update_progress(run.id, epoch=1, pid=999)  # someone else's pid
    assert store.heartbeat(run.id, pid=999) == "lost"
    assert store.update_progress(run.id, epoch=1, pid=100) and store.update_progress(run.id, loss=0.3, pid=100)
    assert store.get(run.id).progress == {"epoch": 1, "loss": 0.3}
    with pytest.raises(TypeError):  # non-JSON progress fails before touching the row
        store.update_progress(run.id, bad=object(), pid=100)
    with pytest.raises(TypeError):
        store.finish(run.id, {"bad": object()}, pid=100)
    assert store.get(run.id).status == "running"
    assert store.mark_interrupted(run.id, "gone")
    assert not store.finish(run.id, {"late": True}, pid=100)  # a late worker never overwrites
    assert not store.fail(run.id, "late error", pid=100)
    final = store.get(run.id)
    assert final.status == "interrupted" and final.result is None and final.error == "gone"


def test_adopt_and_set_worker(store):
    run = store.submit(KIND, {"x": 1})
    assert store.adopt(run.id, pid=5).status == "running"  # a worker started by hand claims it
    assert store.adopt(run.id, pid=6) is None  # another worker cannot
    other = store.submit(KIND, {"x": 2})
    store.claim(other.id, host="h")  # the launcher's claim: no pid yet
    assert store.adopt(other.id, pid=8).pid == 8
    assert store.set_worker(other.id, 8, log_path="/tmp/x.log") and store.get(other.id).log_path == "/tmp/x.log"
    assert not store.set_worker(other.id, 9)


def test_cancel_queued_and_running(store):
    queued = store.submit(KIND, {"x": 1})
    assert store.request_cancel(queued.id).status == "cancelled"
    running = store.submit(KIND, {"x": 2})
    store.claim(running.id, pid=3)
    assert not store.cancel_requested(running.id) and store.run_state(running.id, pid=3) == "ok"
    after = store.request_cancel(running.id)
    assert after.status == "running" and after.cancel_requested is not None
    assert store.cancel_requested(running.id)
    assert store.run_state(running.id, pid=3) == "cancel" and store.heartbeat(running.id, pid=3) == "cancel"
    assert store.mark_cancelled(running.id, pid=3) and store.get(running.id).status == "cancelled"
    assert store.request_cancel(running.id).status == "cancelled"  # final runs are left alone
    assert store.request_cancel(12345) is None


def test_mark_stale_only_touches_old_running_rows(store):
    ids = [store.submit(KIND, {"x": x}).id for x in range(4)]
    store.claim(ids[0], pid=1)
    store.claim(ids[1], pid=2)
    store.claim(ids[2], pid=3)
    store.finish(ids[2], {"ok": 1}, pid=3)
    now = time.time()
    assert store.mark_stale(60) == []
    assert store.update_progress(ids[1], epoch=3, pid=2)
    stale = store.mark_stale(60, now=now + 90)
    assert sorted(stale) == [ids[0], ids[1]]
    run = store.get(ids[0])
    assert run.status == "interrupted" and run.error == stale_message(90) == (
        "no heartbeat for 90 s (worker killed, server restarted or machine slept)"
    )
    assert store.get(ids[1]).progress == {"epoch": 3}
    assert store.get(ids[2]).result == {"ok": 1} and store.get(ids[3]).status == "queued"


def test_sweeps_membership_results_export_and_delete(store, tmp_path):
    a = store.create_sweep("a", {"grid": {"x": [1, 2]}})
    b = store.create_sweep("b")
    assert store.create_sweep("a", {"grid": {"x": [1, 2, 3]}}).id == a.id  # get-or-create
    ra = store.submit_many([(KIND, {"x": 1, "cfg": {"lr": 0.1}}, None), (KIND, {"x": 2}, None)], sweep="a")
    rb = store.submit_many([(KIND, {"x": 2}, None), (KIND, {"x": 3}, None)], sweep=b.id)
    shared = ra[1][0].id
    assert rb[0][0].id == shared and rb[0][1] == "existing"  # one run, two sweeps
    assert [r.config["x"] for r in store.list_runs(sweep="a")] == [1, 2]
    assert [r.config["x"] for r in store.list_runs(sweep="b")] == [2, 3]
    for run in store.list_runs(sweep="a"):
        store.claim(run.id, pid=1)
        store.finish(run.id, {"acc": run.config["x"] / 10, "curve": [0.1, 0.2], "m": {"f1": 0.5}}, pid=1)
    assert store.counts(sweep="b") == {**dict.fromkeys(store.counts(), 0), "done": 1, "queued": 1}
    assert store.active_counts() == {b.id: {"queued": 1, "running": 0}}  # "a" is all done: not listed
    store.claim(rb[1][0].id, pid=2)
    assert store.active_counts() == {b.id: {"queued": 0, "running": 1}}
    rows = store.results("a")
    assert rows[0]["config"] == {"x": 1, "cfg": {"lr": 0.1}} and rows[0]["result"]["acc"] == 0.1
    out = tmp_path / "out" / "a.csv"
    assert store.export_csv(out, sweep="a") == 2
    table = list(csv.DictReader(out.open()))
    assert list(table[0])[:5] == ["run_id", "key", "kind", "status", "seconds"]
    assert {"config.x", "config.cfg.lr", "result.acc", "result.curve", "result.m.f1", "error"} <= set(table[0])
    assert (
        table[0]["config.cfg.lr"] == "0.1"
        and table[1]["config.cfg.lr"] == ""
        and table[0]["result.curve"] == "[0.1,0.2]"
    )
    store.claim(rb[1][0].id, pid=1)
    with pytest.raises(StoreError, match="running"):
        store.delete_sweep("b")
    store.mark_cancelled(rb[1][0].id)
    assert store.delete_sweep("b") == 1  # only the run no other sweep uses
    assert store.get(shared).status == "done" and store.get_sweep("b") is None
    assert [s.name for s in store.list_sweeps()] == ["a"]
    with pytest.raises(StoreError):
        store.list_runs(sweep="b")


def test_failed_transaction_rolls_back(store):
    run = store.submit(KIND, {"x": 1})
    store.claim(run.id, pid=1)
    store.finish(run.id, {"acc": 1.0}, pid=1)
    with pytest.raises(ZeroDivisionError):
        with store._write() as conn:
            conn.execute("UPDATE runs SET result_json = '{}' WHERE id = ?", (run.id,))
            1 / 0
    assert store.get(run.id).result == {"acc": 1.0}


def test_list_runs_without_results_reads_every_other_column(store):
    import dataclasses

    done = store.submit(KIND, {"x": 1})
    store.claim(done.id)
    store.finish(done.id, {"accuracy": 0.5, "history": [{"epoch": 1}]})
    store.submit(KIND, {"x": 2})
    full = store.list_runs()
    assert full[0].result == {"accuracy": 0.5, "history": [{"epoch": 1}]}
    assert store.list_runs(results=False) == [dataclasses.replace(run, result=None) for run in full]
    assert store.list_runs(status="done", results=False)[0].config == {"x": 1}


def test_store_is_a_path_not_a_connection(store):
    import pickle

    clone = pickle.loads(pickle.dumps(store))
    assert clone == store and clone.submit(KIND, {"x": 9}).id == store.get_by_key(config_key({"x": 9})).id
    assert Path(store.log_path(3)).name == "run-3.log" and store.log_dir.name == "results-logs"
