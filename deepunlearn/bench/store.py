"""The results store: every (model, target, method, parameter) point, written atomically
(its contract: docs/design.md section 5).

Why SQLite (WAL journal, one transaction per point) rather than JSON lines:

* a point is either wholly in the file or not at all, whatever kills the process (Ctrl-C,
  ``kill -9``, a crash, a full disk); there is no torn last line to repair on reading;
* the primary key ``(model, target, method, param)`` makes a duplicate point impossible, so a
  resumed run cannot silently count a point twice;
* readers (a report, ``sqlite3 results.sqlite``, pandas) can look at a sweep while it runs;
* ``synchronous=FULL`` makes each committed point survive a power cut as well. The cost, one
  fsync per point, is milliseconds against the seconds it takes to unlearn and probe.

Only the driver process writes (Ray workers stream their points back to it), so the file never
needs a network file system.

Tables: ``meta`` (schema version, config fingerprint, resolved config; a tracked sweep's
``sweep_id``; each model's K per run seed, :func:`known_key`), ``points`` (one row per
evaluated point), ``jobs`` (a finished or skipped (model, target, method) trajectory) and
``evaluations`` (an append-only log: one row per point the sweep computed, with the process that
computed it; a resumed run that recomputed a finished point would show up here twice).

A point's ``measures`` (likelihood, membership and reference-model scores) is a nullable
JSON text column, NULL when the sweep computed no scores. Stores written before the column existed
still open: a writer adds the column (``ALTER TABLE ... ADD COLUMN``), a read-only reader reads
every point's measures as None.

A point's ``accuracy_groups`` (the accuracy per relation group of the sweep's KB's domain, in the
KB's order) is kept in the ``extra`` JSON column as ``[[group, accuracy], ...]`` pairs (the column
is written with sorted keys; pairs keep the KB's order). The table's columns ``accuracy_family`` /
``accuracy_biography`` are where stores written before per-group accuracies kept the family
domain's two groups; they are still filled from the groups of those names (NULL for a domain
without them) so that the table reads as before in ``sqlite3`` or pandas. A point of an older store
(no pairs) reads them as its ``accuracy_groups``, ``{"family": ..., "biography": ...}`` (the family
domain's, which is all such a store can hold).

A point's run seed (``[run] seeds``) is the ``seed`` column of ``points`` and ``jobs`` (part of their
keys) and of ``evaluations``. A store written before the column opens too: a writer rebuilds the two
tables once with the column (every row gets the bound sweep's ``seed``), a read-only reader reads
that seed for every point.

A point measured with a sampled accuracy (:mod:`deepunlearn.unlearn.sampled`) has the 95 % bounds of
its accuracy in the nullable columns ``accuracy_low`` / ``accuracy_high`` (NULL for a full probe),
added to older stores like ``measures``; a read-only reader of such a store reads them as None.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import UserError, dumps
from .store_guard import discard, guard, is_corrupt
from ..unlearn.point_fields import LEGACY_GROUPS
from .store_point import METRIC_COLUMNS, TIMING_KEYS, Point, param_value  # noqa: F401  (re-exported)

SCHEMA_VERSION = 1
STORE_NAME = "results.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    model TEXT NOT NULL, target INTEGER NOT NULL, method TEXT NOT NULL, param REAL NOT NULL,
    recall REAL, accuracy REAL, accuracy_family REAL, accuracy_biography REAL,
    accuracy_rule REAL, accuracy_other REAL,
    target_forgotten INTEGER NOT NULL, forgotten TEXT NOT NULL, exact INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}', written_at REAL NOT NULL, measures TEXT,
    accuracy_low REAL, accuracy_high REAL, seed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model, target, method, param, seed)
);
CREATE TABLE IF NOT EXISTS jobs (
    model TEXT NOT NULL, target INTEGER NOT NULL, method TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'skipped')), reason TEXT, finished_at REAL NOT NULL,
    seed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model, target, method, seed)
);
CREATE TABLE IF NOT EXISTS evaluations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, model TEXT NOT NULL, target INTEGER NOT NULL,
    method TEXT NOT NULL, param REAL NOT NULL, pid INTEGER NOT NULL, at REAL NOT NULL, seed INTEGER
);
"""

_TABLE_SQL = {name: "CREATE TABLE IF NOT EXISTS " + part.strip().rstrip(";")
              for part in _SCHEMA.split("CREATE TABLE IF NOT EXISTS")[1:] for name in [part.split()[0]]}


#: columns older stores lack, with their type: ALTER TABLE appends them in this order
_ADDED_COLUMNS = {"measures": "TEXT", "accuracy_low": "REAL", "accuracy_high": "REAL"}
#: Every column of ``points`` in the order written and read (the added columns last).
_POINT_COLUMNS = ("model", "target", "method", "param", "recall", "accuracy", "accuracy_family", "accuracy_biography",
                  "accuracy_rule", "accuracy_other", "target_forgotten", "forgotten", "exact",
                  "extra", "written_at", *_ADDED_COLUMNS, "seed")
_JOB_COLUMNS = ("model", "target", "method", "status", "reason", "finished_at")


def known_key(model: str, seed: int | None) -> str:
    """The ``meta`` key of a model's K (the fact ids it knew before unlearning, a JSON list) for
    one run seed: recorded when a sweep loads the model, read by the report's derivations."""
    return f"known {model} seed {seed}"


class StoreError(UserError, ValueError):
    """The results store belongs to another sweep or cannot be read."""


#: the key of a point's group accuracies in the ``extra`` column
_GROUPS_KEY = "accuracy_groups"


def _extra_json(p: Point) -> str:
    """The ``extra`` column: the point's extra keys plus its group accuracies as ordered pairs."""
    extra = dict(p.extra)
    if p.accuracy_groups is not None:
        extra[_GROUPS_KEY] = [[g, a] for g, a in p.accuracy_groups.items()]
    return dumps(extra, sort_keys=True, default=str)


class ResultsStore:
    """An open results store. Use as a context manager, or call :meth:`close`.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with ResultsStore(d) as s:
    ...     resumed = s.bind("abc", {"kb": "kb.json"})
    ...     s.add_point(Point("tiny", 3, "ga", 1, recall=0.5, accuracy=0.9, forgotten=(3, 7)))
    ...     s.finish_job("tiny", 3, "ga")
    >>> with ResultsStore(d) as s:
    ...     [p.forgotten for p in s.points()], s.done_params("tiny", 3, "ga"), s.job_status("tiny", 3, "ga")
    ([(3, 7)], {1}, 'done')
    """

    def __init__(self, folder: str | os.PathLike, *, readonly: bool = False, discard_damaged: bool = False):
        self.folder = Path(folder)
        self.path = self.folder / STORE_NAME
        if readonly:
            if not self.path.exists():
                raise StoreError(f"{self.path}: no results store here")
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60)
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                self._open()
            except sqlite3.DatabaseError as e:
                if not (discard_damaged and is_corrupt(e)):  # --overwrite starts a damaged store over
                    raise
                self._db.close()
                discard(self.path)
                self._open()
        self._columns = self._point_columns()
        self._pid = os.getpid()
        #: the seed of points and jobs stored without one: the bound sweep's seed
        self.default_seed = self._config_seed()

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        # a truncated store fails here, before a sweep runs for hours and fails on its first read
        check = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed ({check})")
        self._db.executescript(_SCHEMA)
        have = self._point_columns()
        for name, kind in _ADDED_COLUMNS.items():  # a store written before the column existed
            if name not in have:
                self._db.execute(f"ALTER TABLE points ADD COLUMN {name} {kind}")
        if "seed" not in have:
            self._add_seeds()

    def _config_seed(self) -> int:
        """The bound sweep's ``seed`` (its config in ``meta``), 0 for an unbound store."""
        try:
            text = self.meta("config")
            seed = json.loads(text).get("seed", 0) if text else 0
            return int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0
        except (ValueError, AttributeError):
            return 0

    def _add_seeds(self) -> None:
        """Rebuild the ``points`` and ``jobs`` tables of a store written before repeated runs with
        the ``seed`` column in their keys; their rows get the sweep's seed (one transaction)."""
        seed = self._config_seed()
        stmts: list[tuple[str, tuple]] = []
        for table, cols in (("points", _POINT_COLUMNS[:-1]), ("jobs", _JOB_COLUMNS)):
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            if "seed" in have:
                continue
            stmts += [(f"ALTER TABLE {table} RENAME TO {table}_seedless", ()), (_TABLE_SQL[table], ()),
                      (f"INSERT INTO {table} ({', '.join(cols)}, seed) SELECT {', '.join(cols)}, ? "
                       f"FROM {table}_seedless", (seed,)), (f"DROP TABLE {table}_seedless", ())]
        if "seed" not in {r[1] for r in self._db.execute("PRAGMA table_info(evaluations)")}:
            stmts.append(("ALTER TABLE evaluations ADD COLUMN seed INTEGER", ()))
        self._tx(stmts)

    def _point_columns(self) -> set[str]:
        return {r[1] for r in self._db.execute("PRAGMA table_info(points)")}

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tx(self, statements: Iterable[tuple[str, tuple]]) -> None:
        """Run statements in one transaction: all of them land, or none does."""
        cur = self._db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements:
                cur.execute(sql, args)
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except sqlite3.Error:  # a full disk may have ended the transaction: the first error says why
                pass
            raise
        cur.execute("COMMIT")

    # ------------------------------------------------------------------ meta
    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def bind(self, fingerprint: str, config: dict[str, Any], *, overwrite: bool = False) -> bool:
        """Tie the store to one sweep. Returns True when it already held results of that sweep
        (a resume). A store of another sweep raises :class:`StoreError` unless ``overwrite``,
        which empties it."""
        have = self.meta("fingerprint")
        if have is not None and have != fingerprint:
            if not overwrite:
                raise StoreError(
                    f"{self.path} holds results of a different sweep (its configuration, KB or grid "
                    f"differ; see {self.folder / 'config.yaml'}): choose another output folder or "
                    "pass --overwrite to discard them"
                )
            self.clear()
            have = None
        resumed = have is not None and self.count_points() > 0
        self._tx([
            ("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("schema_version", str(SCHEMA_VERSION))),
            ("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("fingerprint", fingerprint)),
            ("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("config", dumps(config, sort_keys=True, default=str))),
        ])
        self.default_seed = self._config_seed()
        return resumed

    def clear(self) -> None:
        """Discard every point, job, evaluation and meta entry (``--overwrite``)."""
        self._tx([(f"DELETE FROM {t}", ()) for t in ("points", "jobs", "evaluations", "meta")])

    def set_meta(self, values: dict[str, str]) -> None:
        """Set meta entries (one transaction)."""
        self._tx([("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, str(v))) for k, v in values.items()])

    # ------------------------------------------------------------------ writing
    def add_point(self, p: Point) -> None:
        """Write one point and its evaluation-log row in a single transaction. Writing a point
        that is already stored raises ``sqlite3.IntegrityError``: results are never recomputed
        and overwritten silently."""
        self.add_points([p])

    def add_points(self, points: Sequence[Point]) -> None:
        """Write several points in ONE transaction (the rows of a batch of targets at one grid
        value): all land or none does, so a resumed batch never finds half of them."""
        now = time.time()
        statements = []
        for p in points:
            statements += [
                (
                    f"INSERT INTO points ({', '.join(_POINT_COLUMNS)}) VALUES ({', '.join('?' * len(_POINT_COLUMNS))})",
                    (p.model, p.target, p.method, float(p.param), p.recall, p.accuracy,
                     *[(p.accuracy_groups or {}).get(g) for g in LEGACY_GROUPS], p.accuracy_rule, p.accuracy_other,
                     int(p.target_forgotten), json.dumps(list(p.forgotten)), int(p.exact),
                     _extra_json(p), now,
                     None if p.measures is None else dumps(p.measures, sort_keys=True, default=str),
                     p.accuracy_low, p.accuracy_high, self._seed(p.seed)),
                ),
                (
                    "INSERT INTO evaluations (model, target, method, param, pid, at, seed) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (p.model, p.target, p.method, float(p.param), self._pid, now, self._seed(p.seed)),
                ),
            ]
        self._tx(statements)

    def drop_points(self, model: str, method: str, seed: int | None = None) -> int:
        """Delete every point of ``method`` for ``model`` and run seed ``seed`` (a sequential run stopped
        half-way: its weights are gone, so it runs again from the first request). Returns how many there were."""
        where = ("WHERE model = ? AND method = ? AND seed = ?", (model, method, self._seed(seed)))
        n = self._db.execute(f"SELECT COUNT(*) FROM points {where[0]}", where[1]).fetchone()[0]
        self._tx([(f"DELETE FROM points {where[0]}", where[1])])
        return int(n)

    def _seed(self, seed: int | None) -> int:
        return self.default_seed if seed is None else int(seed)

    def finish_job(self, model: str, target: int, method: str, status: str = "done", reason: str | None = None,
                   seed: int | None = None) -> None:
        """Mark a job finished (or skipped) for run seed ``seed`` (None: the sweep's seed)."""
        self._tx([(
            f"INSERT OR REPLACE INTO jobs ({', '.join(_JOB_COLUMNS)}, seed) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (model, int(target), method, status, reason, time.time(), self._seed(seed)),
        )])

    # ------------------------------------------------------------------ reading
    def _seed_sql(self, table: str) -> str:
        """The seed column of ``table``, or the sweep's seed for a read-only store without one."""
        have = self._columns if table == "points" else {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
        return "seed" if "seed" in have else str(int(self.default_seed))

    def job_status(self, model: str, target: int, method: str, seed: int | None = None) -> str | None:
        row = self._db.execute(
            f"SELECT status FROM jobs WHERE model = ? AND target = ? AND method = ? AND {self._seed_sql('jobs')} = ?",
            (model, int(target), method, self._seed(seed))).fetchone()
        return row[0] if row else None

    def jobs(self, seed: int | None = None) -> dict[tuple[str, int, str], tuple[str, str | None]]:
        """Finished jobs of run seed ``seed`` (None: the sweep's seed): ``(model, target, method) -> (status, reason)``."""
        return {(m, t, me): (s, r) for m, t, me, s, r in self._db.execute(
            f"SELECT model, target, method, status, reason FROM jobs WHERE {self._seed_sql('jobs')} = ?",
            (self._seed(seed),))}

    def all_jobs(self) -> dict[tuple[str, int, str, int], tuple[str, str | None]]:
        """Finished jobs of every seed: ``(model, target, method, seed) -> (status, reason)``."""
        return {(m, t, me, int(sd)): (s, r) for m, t, me, s, r, sd in self._db.execute(
            f"SELECT model, target, method, status, reason, {self._seed_sql('jobs')} FROM jobs")}

    def done_params(self, model: str, target: int, method: str, seed: int | None = None) -> set[float]:
        """The stored grid values of one trajectory of run seed ``seed`` (None: the sweep's seed)."""
        rows = self._db.execute(
            f"SELECT param FROM points WHERE model = ? AND target = ? AND method = ? AND {self._seed_sql('points')} = ?",
            (model, int(target), method, self._seed(seed)))
        return {param_value(r[0]) for r in rows}

    def count_points(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM points").fetchone()[0]

    def points(self, model: str | None = None) -> list[Point]:
        """All stored points in a stable order (model, method, target, param)."""
        # read-only old stores: NULL for a missing column, the sweep's seed for a missing seed
        cols = ", ".join(c if c in self._columns else ("NULL" if c != "seed" else self._seed_sql("points"))
                         for c in _POINT_COLUMNS)
        sql = f"SELECT {cols} FROM points" + (" WHERE model = ?" if model is not None else "")
        sql += " ORDER BY model, method, target, param, seed" if "seed" in self._columns else \
            " ORDER BY model, method, target, param"
        return [self._row_point(r) for r in self._db.execute(sql, (model,) if model is not None else ())]

    def evaluations(self) -> list[tuple[str, int, str, float, int]]:
        """The evaluation log: ``(model, target, method, param, pid)`` in the order computed."""
        return [(m, t, me, param_value(p), pid) for m, t, me, p, pid in self._db.execute(
            "SELECT model, target, method, param, pid FROM evaluations ORDER BY seq")]

    @staticmethod
    def _row_point(r: tuple) -> Point:
        (model, target, method, param, recall, acc, fam, bio, rule, other, tf, forgotten, exact, extra, _at,
         measures, low, high, seed) = r
        extra = json.loads(extra)
        pairs = extra.pop(_GROUPS_KEY, None)
        groups = dict(zip(LEGACY_GROUPS, (fam, bio))) if pairs is None else {str(g): a for g, a in pairs}
        return Point(model, int(target), method, param_value(param), recall, acc, rule, other,
                     bool(tf), tuple(json.loads(forgotten)), bool(exact), extra,
                     None if measures is None else json.loads(measures), groups, low, high, int(seed))


# every sqlite3 error of its public methods (a damaged file, a full disk, a read-only folder) is one StoreError
# naming the file
guard(ResultsStore, StoreError, private=("_tx",))
