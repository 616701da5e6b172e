"""SQLite results store: every run (one job: a callable, a config, an identity key) is a row.

One file (``DPMIX_STORE``, else ``~/.cache/dpmix/results.sqlite``), WAL mode, a busy timeout and a
fresh connection per call, so any number of processes and threads can read and write at once: the
Streamlit server, the sweep CLI and every worker process. Nothing keeps a connection open, and a
``ResultStore`` is only a path, so it pickles and crosses process boundaries.

Statuses (who moves a row along each arrow: ``claim`` by a launcher for the worker it starts, or by a
long-lived pool worker for itself, under its own pid; ``finish``/``fail``/``cancel`` by the worker
holding the row, or by the launcher when that worker's process is gone; ``mark_stale`` by anyone)::

    queued --claim--> running --finish--> done
       |                 |------fail----> failed        (the job raised, or its worker died)
       |                 |----cancel----> cancelled     (cancel flag honoured, or worker stopped after it)
       |                 '--mark_stale--> interrupted   (no heartbeat: killed, server restarted, machine slept)
       '----------------request_cancel--> cancelled

Rules that keep stored results safe:

* every write is one ``BEGIN IMMEDIATE`` transaction; JSON is encoded before the transaction opens;
* a worker's writes (progress, heartbeat, result, error) are conditional on the row still being
  ``running`` under that worker's pid, so a worker that was declared interrupted, or whose row was
  deleted, can never overwrite anything;
* a pool worker holds at most one running row at a time (it claims the next one only after writing
  the outcome of the last), so a worker that dies leaves exactly one row ``running``: only that run
  becomes failed/interrupted, and every other row is untouched;
* a ``done`` row is never modified by ``submit`` (results are reused, never recomputed); failed,
  cancelled and interrupted rows are re-queued only when asked;
* ids are ``AUTOINCREMENT``: a deleted run's id is never reused by another run;
* files beside the store (``<stem>-logs/``): a run's log, and its training checkpoint while it is not
  done (:meth:`ResultStore.checkpoint_path`; a re-queued run continues from it). ``finish`` removes the
  checkpoint, deleting a run removes both.

Sweeps: a ``sweeps`` row names a group of runs. A run belongs to every sweep that submitted it
(table ``sweep_runs``), so a run done for one sweep is reused by the next; ``runs.sweep_id`` keeps
the sweep that first created it.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from dpmix_core.resources.files import write_files_atomically

__all__ = [
    "ACTIVE_STATUSES",
    "DEFAULT_BUSY_TIMEOUT_S",
    "FINAL_STATUSES",
    "RETRYABLE_STATUSES",
    "SCHEMA_VERSION",
    "STATUSES",
    "ResultStore",
    "Run",
    "StoreError",
    "Sweep",
    "canonical_json",
    "dumps_json",
    "config_key",
    "DEFAULT_STORE_IN_HOME",
    "default_store_path",
    "flatten",
    "stale_message",
    "store_problem",
]

SCHEMA_VERSION = 1
STATUSES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
ACTIVE_STATUSES = frozenset({"queued", "running"})
FINAL_STATUSES = frozenset({"done", "failed", "cancelled", "interrupted"})
RETRYABLE_STATUSES = frozenset({"failed", "cancelled", "interrupted"})
DEFAULT_BUSY_TIMEOUT_S = 30.0
HOST = socket.gethostname()

SubmitOutcome = Literal["new", "existing", "requeued"]
RunState = Literal["ok", "cancel", "lost"]


class StoreError(ValueError):
    """The store cannot do what was asked (newer schema, unknown sweep, running runs in the way, a
    damaged or unreadable file...). The message is one line naming the file and what to do."""


def store_problem(path: Path, exc: BaseException) -> StoreError | None:
    """The one-line :class:`StoreError` for a file-level SQLite/OS failure of the store at ``path``
    (damaged, not a database, unopenable folder), or None when ``exc`` is not one of those
    (locks, constraint violations: the caller's business)."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        return StoreError(
            f"results store {path} is damaged ({exc}): move it aside (or restore a backup) "
            "and run again to start a new store, or pass --store / DPMIX_STORE with another file"
        )
    if isinstance(exc, sqlite3.OperationalError) and (
        "unable to open" in text or "readonly" in text or "read-only" in text or "disk i/o" in text
    ):
        return StoreError(
            f"cannot write the results store {path} ({exc}): make its folder {path.parent} "
            "writable, or pass --store / DPMIX_STORE with a file in a writable folder"
        )
    if isinstance(exc, PermissionError) or (isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error)):
        return StoreError(
            f"cannot create the results store {path} ({exc.strerror or exc}): pass --store / "
            "DPMIX_STORE with a file in a writable folder"
        )
    return None


def _stays_empty(path: Path, wait_s: float = 1.0) -> bool:
    """A 0-byte file that stays empty for ``wait_s``: not a store being created this moment by another
    process (SQLite writes the header within milliseconds), but an empty or truncated file."""
    deadline = time.monotonic() + wait_s
    try:
        while path.is_file() and path.stat().st_size == 0:
            if time.monotonic() > deadline:
                return True
            time.sleep(0.05)
    except OSError:
        pass
    return False


DEFAULT_STORE_IN_HOME = Path(".cache") / "dpmix" / "results.sqlite"  # the store of a process without $DPMIX_STORE


def default_store_path() -> Path:
    """``$DPMIX_STORE`` if set, else ``~/.cache/dpmix/results.sqlite``."""
    env = os.environ.get("DPMIX_STORE")
    return Path(env).expanduser() if env else Path.home() / DEFAULT_STORE_IN_HOME


def _json_default(obj: Any) -> Any:
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars, torch tensors
    if callable(tolist):
        return tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (datetime.date, datetime.time)):  # TOML dates in sweep specs
        return obj.isoformat()
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def dumps_json(obj: Any) -> str:
    """Compact, key-sorted JSON of a result or progress dict (numpy values and paths made JSON-ready)."""
    return json.dumps(obj, default=_json_default, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, numpy/torch values as lists: equal configs give equal text."""
    return dumps_json(obj)


def config_key(config: Mapping[str, Any]) -> str:
    """Default run identity: sha256 of the canonical JSON of the config."""
    return hashlib.sha256(canonical_json(dict(config)).encode()).hexdigest()


def stale_message(seconds: float) -> str:
    return f"no heartbeat for {int(seconds)} s (worker killed, server restarted or machine slept)"


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": "[1,2]"}`` (lists as JSON text)."""
    out: dict[str, Any] = {}
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        out[prefix] = dumps_json(list(obj))
    else:
        out[prefix] = obj
    return out


@dataclass(frozen=True)
class Run:
    """One row of ``runs``, decoded. Times are Unix seconds (``time.time()``)."""

    id: int
    key: str
    kind: str
    config: dict
    status: str
    progress: dict
    heartbeat: float | None
    created: float
    started: float | None
    finished: float | None
    result: dict | None
    error: str | None
    sweep_id: int | None
    pid: int | None
    host: str | None
    backend: str
    cancel_requested: float | None
    attempts: int
    log_path: str | None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def error_summary(self) -> str | None:
        """First line of the error (the rest is the traceback)."""
        return self.error.splitlines()[0] if self.error else None

    @property
    def duration_s(self) -> float | None:
        if self.started is None:
            return None
        return (self.finished if self.finished is not None else time.time()) - self.started

    def heartbeat_age_s(self, now: float | None = None) -> float | None:
        return None if self.heartbeat is None else (time.time() if now is None else now) - self.heartbeat

    def result_row(self) -> dict:
        """``{"config", "result", "id", "key", "kind", "status", "error", "started", "finished", "seconds"}``: the run
        as :meth:`ResultStore.results` lists it."""
        return {
            "config": self.config,
            "result": self.result,
            "id": self.id,
            "key": self.key,
            "kind": self.kind,
            "status": self.status,
            "error": self.error_summary,
            "started": self.started,
            "finished": self.finished,
            "seconds": None if self.started is None or self.finished is None else self.finished - self.started,
        }

    def to_dict(self) -> dict:
        return {**asdict(self), "error_summary": self.error_summary, "duration_s": self.duration_s}

    @classmethod
    def _from_row(cls, row: sqlite3.Row) -> Run:
        return cls(
            id=row["id"],
            key=row["key"],
            kind=row["kind"],
            config=_loads(row["config_json"]) or {},
            status=row["status"],
            progress=_loads(row["progress_json"]) or {},
            heartbeat=row["heartbeat"],
            created=row["created"],
            started=row["started"],
            finished=row["finished"],
            result=_loads(row["result_json"]),
            error=row["error"],
            sweep_id=row["sweep_id"],
            pid=row["pid"],
            host=row["host"],
            backend=row["backend"],
            cancel_requested=row["cancel_requested"],
            attempts=row["attempts"],
            log_path=row["log_path"],
        )


@dataclass(frozen=True)
class Sweep:
    id: int
    name: str
    spec: dict
    created: float
    backend: str
    location: str | None

    @classmethod
    def _from_row(cls, row: sqlite3.Row) -> Sweep:
        return cls(
            id=row["id"],
            name=row["name"],
            spec=_loads(row["spec_json"]) or {},
            created=row["created"],
            backend=row["backend"],
            location=row["location"],
        )


# Every column of ``runs`` with the result left unread (``list_runs(results=False)``); a test checks it
# against the table.
_RUN_COLUMNS_WITHOUT_RESULT = (
    "runs.id, runs.key, runs.kind, runs.config_json, runs.status, runs.progress_json, runs.heartbeat, runs.created,"
    " runs.started, runs.finished, NULL AS result_json, runs.error, runs.sweep_id, runs.pid, runs.host, runs.backend,"
    " runs.cancel_requested, runs.attempts, runs.log_path"
)
_STATUS_CHECK = ", ".join(f"'{s}'" for s in STATUSES)
# Schema migrations: version -> statements taking the store from version-1 to version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS sweeps (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            spec_json TEXT NOT NULL DEFAULT '{}',
            created REAL NOT NULL,
            backend TEXT NOT NULL DEFAULT 'local',
            location TEXT
        )""",
        f"""CREATE TABLE IF NOT EXISTS runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            key TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            config_json TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ({_STATUS_CHECK})),
            progress_json TEXT,
            heartbeat REAL,
            created REAL NOT NULL,
            started REAL,
            finished REAL,
            result_json TEXT,
            error TEXT,
            sweep_id INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,
            pid INTEGER,
            host TEXT,
            backend TEXT NOT NULL DEFAULT 'local',
            cancel_requested REAL,
            attempts INTEGER NOT NULL DEFAULT 0,
            log_path TEXT
        )""",
        "CREATE INDEX IF NOT EXISTS runs_status ON runs(status, backend, host)",
        "CREATE INDEX IF NOT EXISTS runs_sweep ON runs(sweep_id)",
        """CREATE TABLE IF NOT EXISTS sweep_runs (
            sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            position INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (sweep_id, run_id)
        )""",
        "CREATE INDEX IF NOT EXISTS sweep_runs_run ON sweep_runs(run_id)",
    ),
}
assert max(_MIGRATIONS) == SCHEMA_VERSION


def _as_statuses(status: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if status is None:
        return None
    statuses = (status,) if isinstance(status, str) else tuple(status)
    bad = [s for s in statuses if s not in STATUSES]
    if bad:
        raise ValueError(f"unknown status {bad[0]!r}; statuses: {', '.join(STATUSES)}")
    return statuses


def _requeue_set(requeue: bool | str | Iterable[str]) -> frozenset[str]:
    if requeue is True:
        return RETRYABLE_STATUSES
    if requeue is False:
        return frozenset()
    statuses = frozenset(_as_statuses(requeue) or ())
    if not statuses <= RETRYABLE_STATUSES:
        raise ValueError(f"only {sorted(RETRYABLE_STATUSES)} runs can be re-queued, not {sorted(statuses)}")
    return statuses


def _check_kind(kind: str) -> str:
    module, sep, attr = kind.partition(":")
    if not (isinstance(kind, str) and sep and module.strip() and attr.strip()):
        raise ValueError(f"job kind must be 'package.module:function', got {kind!r}")
    return kind


class ResultStore:
    """The SQLite store. Cheap to construct (one schema check); holds no connection."""

    def __init__(self, path: str | os.PathLike | None = None, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S):
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        if str(self.path) in ("", ":memory:"):
            raise ValueError("the store needs a file path (every call opens a fresh connection)")
        self.busy_timeout_s = float(busy_timeout_s)
        if self.path.is_dir():
            raise StoreError(
                f"results store {self.path} is a folder, not a file: pass --store / DPMIX_STORE with a file path"
            )
        if _stays_empty(self.path):
            raise StoreError(
                f"results store {self.path} is an empty (0-byte) file, not a store: delete it to "
                "start a new store, or restore it from a backup"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._init_schema()
        except (sqlite3.Error, OSError) as exc:
            raise (store_problem(self.path, exc) or exc) from None

    @classmethod
    def existing(cls, path: str | os.PathLike | None = None) -> ResultStore:
        """The store at ``path`` (default: :func:`default_store_path`) for reading: a path that does not exist
        is refused (StoreError) instead of becoming a new, empty store (a mistyped --store)."""
        where = Path(path).expanduser() if path is not None else default_store_path()
        if not where.exists():
            raise StoreError(f"results store {where} does not exist: pass --store / DPMIX_STORE with an existing store")
        return cls(where)

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResultStore) and self.path.resolve() == other.path.resolve()

    def __hash__(self) -> int:
        return hash(str(self.path.resolve()))

    # -- connections -------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: a crash loses no committed-and-synced data
        return conn

    @contextmanager
    def _file_errors(self) -> Iterator[None]:
        """Damaged/unwritable-file errors become one-line :class:`StoreError` naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise (store_problem(self.path, exc) or exc) from None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._file_errors():
            conn = self._connect()
            try:
                conn.execute("BEGIN")  # one snapshot for every statement of the call
                yield conn
            finally:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._file_errors(), self._write_unchecked() as conn:
            yield conn

    @contextmanager
    def _write_unchecked(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _init_schema(self) -> None:
        conn = self._connect()
        try:
            deadline = time.monotonic() + self.busy_timeout_s
            while True:  # switching to WAL needs a moment alone with the file
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path} has schema version {version}; this dpmix_core reads up to {SCHEMA_VERSION}"
                    )
                for v in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[v]:
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def schema_version(self) -> int:
        conn = self._connect()
        try:
            return conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()

    def journal_mode(self) -> str:
        conn = self._connect()
        try:
            return conn.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            conn.close()

    def integrity_check(self) -> str:
        conn = self._connect()
        try:
            return conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()

    @property
    def log_dir(self) -> Path:
        """Worker logs live beside the store: ``results.sqlite`` -> ``results-logs/``."""
        return self.path.parent / f"{self.path.stem}-logs"

    def log_path(self, run_id: int) -> Path:
        return self.log_dir / f"run-{int(run_id)}.log"

    def checkpoint_path(self, run_id: int) -> Path:
        """Where a run's worker keeps its training state (:mod:`dpmix_core.training.checkpoint`), beside its log.

        The file outlives a failed, cancelled or interrupted run, so the run continues from it when it is
        queued again; :meth:`finish` and the deletions remove it."""
        return self.log_dir / f"run-{int(run_id)}.ckpt"

    def _remove_run_files(self, run_id: int, *, log: bool) -> None:
        paths = [self.checkpoint_path(run_id), *([self.log_path(run_id)] if log else [])]
        for path in paths:
            try:
                path.unlink()
            except OSError:
                pass

    # -- helpers -----------------------------------------------------------------------------------
    @staticmethod
    def _get(conn: sqlite3.Connection, run_id: int) -> Run | None:
        row = conn.execute("SELECT * FROM runs WHERE id = ?", (int(run_id),)).fetchone()
        return None if row is None else Run._from_row(row)

    @staticmethod
    def _sweep_id(conn: sqlite3.Connection, sweep: int | str | Sweep) -> int:
        if isinstance(sweep, Sweep):
            sweep = sweep.id
        if isinstance(sweep, str):
            row = conn.execute("SELECT id FROM sweeps WHERE name = ?", (sweep,)).fetchone()
        else:
            row = conn.execute("SELECT id FROM sweeps WHERE id = ?", (int(sweep),)).fetchone()
        if row is None:
            raise StoreError(f"no sweep {sweep!r} in this store")
        return row[0]

    @staticmethod
    def _owner_clause(pid: int | None) -> tuple[str, tuple]:
        """Worker writes only touch a running row that is theirs (pid not yet recorded counts as theirs)."""
        if pid is None:
            return "status = 'running'", ()
        return "status = 'running' AND (pid IS NULL OR pid = ?)", (int(pid),)

    # -- submitting --------------------------------------------------------------------------------
    def submit(
        self,
        kind: str,
        config: Mapping[str, Any],
        key: str | None = None,
        *,
        sweep: int | str | Sweep | None = None,
        backend: str = "local",
        requeue: bool | str | Iterable[str] = False,
    ) -> Run:
        """Queue a run, idempotently by ``key`` (default :func:`config_key`).

        An existing run with the same key is returned as it is when done, queued or running (done
        results are reused, never recomputed). Failed, cancelled or interrupted runs are re-queued only
        when ``requeue`` is True or names their status. The default key covers the config only, so a
        key already used by another ``kind`` raises ValueError (never returns another job's result).
        """
        return self.submit_many([(kind, config, key)], sweep=sweep, backend=backend, requeue=requeue)[0][0]

    def submit_many(
        self,
        runs: Iterable[tuple[str, Mapping[str, Any], str | None]],
        *,
        sweep: int | str | Sweep | None = None,
        backend: str = "local",
        requeue: bool | str | Iterable[str] = False,
    ) -> list[tuple[Run, SubmitOutcome]]:
        """:meth:`submit` for many runs in one transaction; each with ``new``/``existing``/``requeued``."""
        again = _requeue_set(requeue)
        prepared = []
        for kind, config, key in runs:
            config_json = canonical_json(dict(config))
            prepared.append((_check_kind(kind), config_json, key or hashlib.sha256(config_json.encode()).hexdigest()))
        now = time.time()
        with self._write() as conn:
            sweep_id = None if sweep is None else self._sweep_id(conn, sweep)
            position = 0
            if sweep_id is not None:
                position = conn.execute(
                    "SELECT COALESCE(MAX(position) + 1, 0) FROM sweep_runs WHERE sweep_id = ?", (sweep_id,)
                ).fetchone()[0]
            out: list[tuple[int, SubmitOutcome]] = []
            for kind, config_json, key in prepared:
                row = conn.execute("SELECT id, status, backend, kind FROM runs WHERE key = ?", (key,)).fetchone()
                outcome: SubmitOutcome
                if row is not None and row["kind"] != kind:
                    raise ValueError(
                        f"key {key[:16]}... is run {row['id']} of kind {row['kind']!r}, not {kind!r}:"
                        " give runs of different kinds different keys (or configs)"
                    )
                if row is None:
                    run_id = conn.execute(
                        "INSERT INTO runs (key, kind, config_json, status, created, sweep_id, backend)"
                        " VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                        (key, kind, config_json, now, sweep_id, backend),
                    ).lastrowid
                    outcome = "new"
                elif row["status"] in again:
                    run_id = row["id"]
                    conn.execute(
                        "UPDATE runs SET status = 'queued', kind = ?, config_json = ?, backend = ?, progress_json = NULL,"
                        " heartbeat = NULL, started = NULL, finished = NULL, result_json = NULL, error = NULL,"
                        " pid = NULL, host = NULL, cancel_requested = NULL, log_path = NULL WHERE id = ?",
                        (kind, config_json, backend, run_id),
                    )
                    outcome = "requeued"
                else:
                    run_id = row["id"]
                    if row["status"] == "queued" and row["backend"] != backend:
                        conn.execute(
                            "UPDATE runs SET backend = ? WHERE id = ? AND status = 'queued'", (backend, run_id)
                        )
                    outcome = "existing"
                if sweep_id is not None:
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO sweep_runs (sweep_id, run_id, position) VALUES (?, ?, ?)",
                        (sweep_id, run_id, position),
                    )
                    position += cur.rowcount
                out.append((int(run_id), outcome))  # type: ignore[arg-type]  # run_id is set on every path
            return [(self._get(conn, run_id), outcome) for run_id, outcome in out]  # type: ignore[misc]

    # -- the run's life ----------------------------------------------------------------------------
    def claim(
        self,
        run_id: int | None = None,
        *,
        backend: str | None = None,
        host: str | None = None,
        pid: int | None = None,
        max_running: int | None = None,
    ) -> Run | None:
        """Atomically move a queued run to running (``run_id``, or the oldest queued one of ``backend``).

        With ``max_running``, claim only while fewer runs of ``backend`` on ``host`` are running: the
        count and the claim happen in one ``BEGIN IMMEDIATE`` transaction, so concurrent launchers never
        exceed the bound. Returns the claimed run, or None (nothing queued, lost the race, bound reached).
        """
        now = time.time()
        with self._write() as conn:
            if max_running is not None:
                running = conn.execute(
                    "SELECT COUNT(*) FROM runs WHERE status = 'running' AND backend IS COALESCE(?, backend)"
                    " AND host IS COALESCE(?, host)",
                    (backend, host),
                ).fetchone()[0]
                if running >= max_running:
                    return None
            if run_id is None:
                row = conn.execute(
                    "SELECT id FROM runs WHERE status = 'queued' AND backend IS COALESCE(?, backend) ORDER BY id LIMIT 1",
                    (backend,),
                ).fetchone()
                if row is None:
                    return None
                run_id = row[0]
            cur = conn.execute(
                "UPDATE runs SET status = 'running', started = ?, heartbeat = ?, finished = NULL, error = NULL,"
                " result_json = NULL, progress_json = NULL, cancel_requested = NULL, pid = ?, host = ?,"
                " backend = COALESCE(?, backend), attempts = attempts + 1 WHERE id = ? AND status = 'queued'",
                (now, now, pid, host, backend, int(run_id)),
            )
            return self._get(conn, run_id) if cur.rowcount == 1 else None

    def adopt(self, run_id: int, *, pid: int, host: str | None = HOST) -> Run | None:
        """A worker takes its run: claims it if queued, or attaches to it if a launcher claimed it for
        this worker (running, pid unset or equal). None when the run is not this worker's to run."""
        now = time.time()
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET status = 'running', started = ?, heartbeat = ?, finished = NULL, error = NULL,"
                " result_json = NULL, progress_json = NULL, cancel_requested = NULL, pid = ?, host = ?,"
                " attempts = attempts + 1 WHERE id = ? AND status = 'queued'",
                (now, now, pid, host, int(run_id)),
            )
            if cur.rowcount == 0:
                cur = conn.execute(
                    "UPDATE runs SET pid = ?, host = COALESCE(host, ?), heartbeat = ?"
                    " WHERE id = ? AND status = 'running' AND (pid IS NULL OR pid = ?)",
                    (pid, host, now, int(run_id), pid),
                )
            return self._get(conn, run_id) if cur.rowcount == 1 else None

    def set_worker(self, run_id: int, pid: int, *, log_path: str | os.PathLike | None = None) -> bool:
        """The launcher records the worker's pid (and log file) on the run it claimed."""
        with self._write() as conn:
            cur = conn.execute(
                "UPDATE runs SET pid = ?, log_path = COALESCE(?, log_path)"
                " WHERE id = ? AND status = 'running' AND (pid IS NULL OR pid = ?)",
                (int(pid), None if log_path is None else os.fspath(log_path), int(run_id), int(pid)),
            )
            return cur.rowcount == 1

    def update_progress(
        self,
        run_id: int,
        fields: Mapping[str, Any] | None = None,
        *,
        pid: int | None = None,
        replace: bool = False,
        **more: Any,
    ) -> bool:
        """Merge ``fields`` into the run's progress (epoch, loss, accuracy, eta_seconds, ...) and refresh
        the heartbeat. False when the run is no longer running under ``pid`` (nothing is written)."""
        new = {**(fields or {}), **more}
        json.loads(dumps_json(new))  # fail on non-JSON values before touching the database
        clause, args = self._owner_clause(pid)
        with self._write() as conn:
            row = conn.execute(
                f"SELECT progress_json FROM runs WHERE id = ? AND {clause}", (int(run_id), *args)
            ).fetchone()
            if row is None:
                return False
            merged = new if replace else {**(_loads(row[0]) or {}), **new}
            conn.execute(
                "UPDATE runs SET progress_json = ?, heartbeat = ? WHERE id = ?",
                (dumps_json(merged), time.time(), int(run_id)),
            )
            return True

    def heartbeat(self, run_id: int, *, pid: int | None = None) -> RunState:
        """Refresh the heartbeat: ``ok``, ``cancel`` (a cancel was requested) or ``lost`` (not ours anymore)."""
        clause, args = self._owner_clause(pid)
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE runs SET heartbeat = ? WHERE id = ? AND {clause}", (time.time(), int(run_id), *args)
            )
            if cur.rowcount == 0:
                return "lost"
            flag = conn.execute("SELECT cancel_requested FROM runs WHERE id = ?", (int(run_id),)).fetchone()[0]
            return "ok" if flag is None else "cancel"

    def run_state(self, run_id: int, *, pid: int | None = None) -> RunState:
        """Read-only twin of :meth:`heartbeat` (what ``reporter.should_stop()`` polls)."""
        with self._read() as conn:
            row = conn.execute("SELECT status, pid, cancel_requested FROM runs WHERE id = ?", (int(run_id),)).fetchone()
        if row is None or row["status"] != "running" or (pid is not None and row["pid"] not in (None, pid)):
            return "lost"
        return "ok" if row["cancel_requested"] is None else "cancel"

    def finish(self, run_id: int, result: Mapping[str, Any] | Any, *, pid: int | None = None) -> bool:
        """Store the result: running -> done. False (nothing written) if the run is not running under pid."""
        result_json = dumps_json(result if isinstance(result, Mapping) else {"value": result})
        clause, args = self._owner_clause(pid)
        now = time.time()
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE runs SET status = 'done', result_json = ?, error = NULL, finished = ?, heartbeat = ?"
                f" WHERE id = ? AND {clause}",
                (result_json, now, now, int(run_id), *args),
            )
            done = cur.rowcount == 1
        if done:  # the result is stored: its training state is no longer needed
            self._remove_run_files(run_id, log=False)
        return done

    def _end(self, run_id: int, status: str, error: str | None, pid: int | None) -> bool:
        clause, args = self._owner_clause(pid)
        now = time.time()
        with self._write() as conn:
            cur = conn.execute(
                f"UPDATE runs SET status = ?, error = ?, finished = ? WHERE id = ? AND {clause}",
                (status, error, now, int(run_id), *args),
            )
            return cur.rowcount == 1

    def fail(self, run_id: int, error: str, *, pid: int | None = None) -> bool:
        """running -> failed. ``error``: a one-line message, then (optionally) the traceback."""
        return self._end(run_id, "failed", error, pid)

    def mark_cancelled(self, run_id: int, reason: str = "cancelled", *, pid: int | None = None) -> bool:
        return self._end(run_id, "cancelled", reason, pid)

    def mark_interrupted(self, run_id: int, reason: str, *, pid: int | None = None) -> bool:
        return self._end(run_id, "interrupted", reason, pid)

    def request_cancel(self, run_id: int) -> Run | None:
        """A queued run is cancelled at once; a running one gets its cancel flag (the worker stops at its
        next ``should_stop()``; launchers stop it after a grace period). Final runs are left alone."""
        now = time.time()
        with self._write() as conn:
            conn.execute(
                "UPDATE runs SET status = 'cancelled', finished = ?, error = 'cancelled before it started'"
                " WHERE id = ? AND status = 'queued'",
                (now, int(run_id)),
            )
            conn.execute(
                "UPDATE runs SET cancel_requested = ? WHERE id = ? AND status = 'running' AND cancel_requested IS NULL",
                (now, int(run_id)),
            )
            return self._get(conn, run_id)

    def cancel_requested(self, run_id: int) -> bool:
        with self._read() as conn:
            row = conn.execute("SELECT cancel_requested FROM runs WHERE id = ?", (int(run_id),)).fetchone()
        return row is not None and row[0] is not None

    def mark_stale(self, timeout_s: float, *, backend: str | None = None, now: float | None = None) -> list[int]:
        """Running runs whose heartbeat is older than ``timeout_s`` -> interrupted (error:
        :func:`stale_message`). Returns their ids. Never touches any other row."""
        now = time.time() if now is None else now
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id, COALESCE(heartbeat, started, created) AS beat FROM runs WHERE status = 'running'"
                " AND COALESCE(heartbeat, started, created) < ? AND backend IS COALESCE(?, backend)",
                (now - timeout_s, backend),
            ).fetchall()
            for row in rows:
                conn.execute(
                    "UPDATE runs SET status = 'interrupted', error = ?, finished = ? "
                    "WHERE id = ? AND status = 'running'",
                    (stale_message(now - row["beat"]), now, row["id"]),
                )
        return [row["id"] for row in rows]

    # -- reading -----------------------------------------------------------------------------------
    def get(self, run_id: int) -> Run | None:
        with self._read() as conn:
            return self._get(conn, run_id)

    def get_by_key(self, key: str) -> Run | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM runs WHERE key = ?", (key,)).fetchone()
        return None if row is None else Run._from_row(row)

    def list_runs(
        self,
        *,
        sweep: int | str | Sweep | None = None,
        status: str | Iterable[str] | None = None,
        ids: Iterable[int] | None = None,
        keys: Iterable[str] | None = None,
        backend: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        results: bool = True,
    ) -> list[Run]:
        """Runs filtered by sweep (id or name; in the sweep's order), status(es), ids, identity keys, backend.

        ``results=False`` leaves every ``result`` None unread: a finished run's result holds its whole training
        history (tens of kB), which a view of where runs stand does not need."""
        where: list[str] = []
        args: list[Any] = []
        statuses = _as_statuses(status)
        if statuses is not None:
            where.append(f"runs.status IN ({', '.join('?' * len(statuses))})")
            args += statuses
        if ids is not None:
            id_list = [int(i) for i in ids]
            if not id_list:
                return []
            where.append(f"runs.id IN ({', '.join('?' * len(id_list))})")
            args += id_list
        if keys is not None:  # whichever sweep ran them (e.g. a quick preset's full protocol)
            key_list = sorted({str(k) for k in keys})
            if not key_list:
                return []
            where.append(f"runs.key IN ({', '.join('?' * len(key_list))})")
            args += key_list
        if backend is not None:
            where.append("runs.backend = ?")
            args.append(backend)
        columns = "runs.*" if results else _RUN_COLUMNS_WITHOUT_RESULT
        with self._read() as conn:
            if sweep is not None:
                sql = f"SELECT {columns} FROM runs JOIN sweep_runs ON sweep_runs.run_id = runs.id"
                where.insert(0, "sweep_runs.sweep_id = ?")
                args.insert(0, self._sweep_id(conn, sweep))
                order = "sweep_runs.position"
            else:
                sql, order = f"SELECT {columns} FROM runs", "runs.id"
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += f" ORDER BY {order}{' DESC' if newest_first else ''}"
            if limit is not None:
                sql += f" LIMIT {int(limit)}"
            return [Run._from_row(row) for row in conn.execute(sql, args)]

    def counts(
        self,
        *,
        sweep: int | str | Sweep | None = None,
        backend: str | None = None,
        run_ids: Iterable[int] | None = None,
    ) -> dict[str, int]:
        """``{status: n}`` with every status present (zeros included); ``run_ids``: of these runs only.

        A sweep keeps every run ever submitted under its name, so after its spec changed it also holds the
        superseded runs: a caller that follows one submission counts that submission's ``run_ids``.
        """
        if run_ids is not None:  # one "id IN (...)", as list_runs(ids=...) (a sweep has at most DPMIX_MAX_RUNS)
            ids = sorted({int(i) for i in run_ids})
            with self._read() as conn:
                rows = conn.execute(
                    f"SELECT status, COUNT(*) FROM runs WHERE id IN ({', '.join('?' * len(ids))}) GROUP BY status",
                    ids,
                ).fetchall()
            return {**dict.fromkeys(STATUSES, 0), **dict(rows)}
        with self._read() as conn:
            if sweep is None:
                rows = conn.execute(
                    "SELECT status, COUNT(*) FROM runs WHERE backend IS COALESCE(?, backend) GROUP BY status",
                    (backend,),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT runs.status, COUNT(*) FROM runs JOIN sweep_runs ON sweep_runs.run_id = runs.id"
                    " WHERE sweep_runs.sweep_id = ? AND runs.backend IS COALESCE(?, runs.backend) GROUP BY runs.status",
                    (self._sweep_id(conn, sweep), backend),
                ).fetchall()
        out = dict.fromkeys(STATUSES, 0)
        out.update({status: n for status, n in rows})
        return out

    def results(
        self,
        sweep: int | str | Sweep | None = None,
        *,
        status: str | Iterable[str] | None = "done",
        keys: Iterable[str] | None = None,
    ) -> list[dict]:
        """Rows ``{"config": ..., "result": ..., "id", "key", "kind", "status", "error", "seconds"}``
        (``keys``: only runs with these identity keys, in any sweep)."""
        return [r.result_row() for r in self.list_runs(sweep=sweep, status=status, keys=keys)]

    def flat_rows(
        self, sweep: int | str | Sweep | None = None, *, status: str | Iterable[str] | None = "done"
    ) -> list[dict]:
        """Flat dicts (``run_id, key, kind, status, seconds, config.*, result.*, error``): a DataFrame/CSV."""
        rows = []
        for r in self.results(sweep, status=status):
            rows.append(
                {
                    "run_id": r["id"],
                    "key": r["key"],
                    "kind": r["kind"],
                    "status": r["status"],
                    "seconds": r["seconds"],
                    **flatten(r["config"], "config"),
                    **flatten(r["result"] or {}, "result"),
                    "error": r["error"],
                }
            )
        return rows

    def export_csv(
        self,
        path: str | os.PathLike | TextIO,
        *,
        sweep: int | str | Sweep | None = None,
        status: str | Iterable[str] | None = "done",
    ) -> int:
        """Write :meth:`flat_rows` as CSV (columns: the union, in first-seen order). Returns the row count."""
        rows = self.flat_rows(sweep, status=status)
        columns: dict[str, None] = dict.fromkeys(["run_id", "key", "kind", "status", "seconds"])
        for group in ("config.", "result."):
            for row in rows:
                columns.update(dict.fromkeys(c for c in row if c.startswith(group)))
        columns["error"] = None
        if isinstance(path, (str, os.PathLike)):
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            buffer = io.StringIO()
            _write_csv(buffer, list(columns), rows)
            write_files_atomically({target: buffer.getvalue().encode("utf-8")})
        else:
            _write_csv(path, list(columns), rows)
        return len(rows)

    # -- sweeps ------------------------------------------------------------------------------------
    def create_sweep(
        self, name: str, spec: Mapping[str, Any] | None = None, *, backend: str = "local", location: str | None = None
    ) -> Sweep:
        """Get-or-create the sweep called ``name`` (a re-run resumes it); updates spec/backend/location."""
        if not name or not isinstance(name, str):
            raise ValueError("a sweep needs a name")
        spec_json = dumps_json(dict(spec or {}))
        with self._write() as conn:
            conn.execute(
                "INSERT INTO sweeps (name, spec_json, created, backend, location) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET spec_json = excluded.spec_json, backend = excluded.backend,"
                " location = excluded.location",
                (name, spec_json, time.time(), backend, location),
            )
            return Sweep._from_row(conn.execute("SELECT * FROM sweeps WHERE name = ?", (name,)).fetchone())

    def get_sweep(self, sweep: int | str) -> Sweep | None:
        with self._read() as conn:
            if isinstance(sweep, str):
                row = conn.execute("SELECT * FROM sweeps WHERE name = ?", (sweep,)).fetchone()
            else:
                row = conn.execute("SELECT * FROM sweeps WHERE id = ?", (int(sweep),)).fetchone()
        return None if row is None else Sweep._from_row(row)

    def list_sweeps(self) -> list[Sweep]:
        with self._read() as conn:
            return [Sweep._from_row(row) for row in conn.execute("SELECT * FROM sweeps ORDER BY id")]

    def active_counts(self) -> dict[int, dict[str, int]]:
        """``{sweep id: {"queued": n, "running": m}}`` for every sweep with a queued or running run (one query)."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT sweep_runs.sweep_id, runs.status, COUNT(*) FROM runs JOIN sweep_runs"
                " ON sweep_runs.run_id = runs.id WHERE runs.status IN ('queued', 'running')"
                " GROUP BY sweep_runs.sweep_id, runs.status"
            ).fetchall()
        out: dict[int, dict[str, int]] = {}
        for sweep_id, status, n in rows:
            out.setdefault(int(sweep_id), {"queued": 0, "running": 0})[status] = int(n)
        return out

    def results_version(self) -> tuple[object, ...]:
        """A value that changes whenever what a view of finished runs reads may have changed: a run finished or
        was deleted, a run joined or left a sweep, a sweep was created, renamed or given another spec. A page
        caches its reading of a sweep under it (one snapshot, three aggregate queries; no result is parsed).

        Runs only ever enter ``done`` through ``finish`` and ids are never reused, so (count, sum of ids, latest
        finish) of the done rows moves with every change to them."""
        with self._read() as conn:
            done = conn.execute("SELECT COUNT(*), TOTAL(id), MAX(finished) FROM runs WHERE status = 'done'").fetchone()
            links = conn.execute("SELECT COUNT(*), TOTAL(sweep_id), TOTAL(run_id) FROM sweep_runs").fetchone()
            sweeps = hashlib.blake2b(digest_size=16)
            for sweep_id, name, spec in conn.execute("SELECT id, name, spec_json FROM sweeps ORDER BY id"):
                sweeps.update(f"{sweep_id}\0{name}\0{spec}\0".encode())
        return (*tuple(done), *tuple(links), sweeps.hexdigest())

    def delete_sweep(self, sweep: int | str | Sweep, *, delete_runs: bool = True, force: bool = False) -> int:
        """Delete a sweep; with ``delete_runs``, also its runs that no other sweep uses (their logs too).

        Refuses (StoreError) while runs of the sweep are running unless ``force``: cancel them first.
        A forcibly deleted run's worker finds its row gone, stops and writes nothing. Returns runs deleted.
        """
        with self._write() as conn:
            sweep_id = self._sweep_id(conn, sweep)
            member = "SELECT run_id FROM sweep_runs WHERE sweep_id = ?"
            running = conn.execute(
                f"SELECT COUNT(*) FROM runs WHERE status = 'running' AND id IN ({member})", (sweep_id,)
            ).fetchone()[0]
            if running and not force:
                raise StoreError(f"sweep {sweep!r} has {running} running run(s); cancel them first")
            doomed: list[int] = []
            if delete_runs:
                doomed = [
                    row[0]
                    for row in conn.execute(
                        "SELECT run_id FROM sweep_runs WHERE sweep_id = ? AND run_id NOT IN"
                        " (SELECT run_id FROM sweep_runs WHERE sweep_id != ?)",
                        (sweep_id, sweep_id),
                    )
                ]
            conn.execute("DELETE FROM sweeps WHERE id = ?", (sweep_id,))  # cascades to sweep_runs
            conn.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in doomed])
        for run_id in doomed:
            self._remove_run_files(run_id, log=True)
        return len(doomed)

    def delete_run(self, run_id: int, *, force: bool = False) -> bool:
        """Delete one run (refuses a running one unless ``force``)."""
        with self._write() as conn:
            run = self._get(conn, run_id)
            if run is None:
                return False
            if run.status == "running" and not force:
                raise StoreError(f"run {run_id} is running; cancel it first")
            conn.execute("DELETE FROM runs WHERE id = ?", (int(run_id),))
        self._remove_run_files(run_id, log=True)
        return True


def _write_csv(stream: TextIO, columns: Sequence[str], rows: Sequence[dict]) -> None:
    writer = csv.DictWriter(stream, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
