"""Where the audit lives and how writers take turns.

Every write transaction is serialized database-wide — SQLite: `BEGIN IMMEDIATE` (WAL, busy timeout);
PostgreSQL: a transaction-level advisory lock — because Airflow runs tasks in separate processes and
each append must read and move the one chain head. Reads never block writers.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import QueuePool, StaticPool

from mirrorbook import settings
from mirrorbook.audit.errors import AuditConfigError, AuditUnavailable
from mirrorbook.redaction import redact_text

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

ENV_URL = settings.AUDIT_URL.env
BUSY_TIMEOUT_S = 30
# pg_advisory_xact_lock key shared by every mirrorbook audit writer ("mbaudit" in ASCII).
PG_WRITE_LOCK_KEY = 0x6D6261756469_74
SUPPORTED = ("sqlite", "postgresql")


def default_url() -> str:
    """The `audit_url` setting, else the URI of the Airflow connection `audit_conn_id` names, else the SQLite file
    `$AIRFLOW_HOME/mirrorbook/audit.db` (`mirrorbook.settings`)."""
    url = settings.AUDIT_URL.get()
    if url:
        return url
    conn_id = settings.AUDIT_CONN_ID.get()
    if conn_id:
        uri = settings.connection_uri(conn_id)
        # Airflow names PostgreSQL connections `postgres`; SQLAlchemy 2 knows only `postgresql`.
        return "postgresql" + uri[len("postgres"):] if uri.startswith("postgres://") else uri
    return f"sqlite:///{settings.airflow_home() / 'mirrorbook' / 'audit.db'}"


def normalize_url(url: str) -> str:
    """A plain filesystem path means a SQLite file; anything else must be a SQLAlchemy URL."""
    return url if "://" in url else f"sqlite:///{Path(url).expanduser().absolute()}"


def _enable_wal(cur: Any) -> None:
    """Switch a fresh file to WAL. SQLite answers "database is locked" at once, without its busy handler,
    when several processes race to switch the same new file — so retry that, within the same busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.01
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


class Database:
    """An engine whose pool is reset after fork, with serialized write and snapshot-consistent read transactions."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        try:
            parsed = make_url(self.url)
        except ArgumentError as exc:
            raise AuditConfigError(f"audit URL {url!r} is not a database URL: {exc}",
                                   "use sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB") from None
        self.backend = parsed.get_backend_name()
        if self.backend not in SUPPORTED:
            raise AuditConfigError(f"audit backend {self.backend!r} is not supported (only {', '.join(SUPPORTED)})",
                                   "use sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB")
        self.display_url = parsed.render_as_string(hide_password=True)
        file = parsed.database if self.backend == "sqlite" and parsed.database not in (None, "", ":memory:") else None
        self._sqlite_file = file is not None
        if file is not None:
            Path(file).parent.mkdir(parents=True, exist_ok=True)
        self._pid = os.getpid()
        self._engine = self._create_engine()

    def _create_engine(self) -> Engine:
        try:
            if self.backend == "sqlite":
                return self._sqlite_engine()
            return create_engine(self.url, pool_pre_ping=True)
        except (NoSuchModuleError, ImportError) as exc:
            raise AuditConfigError(f"no database driver for {self.display_url}: {exc}",
                                   "install the driver (psycopg2-binary for PostgreSQL)") from None

    def _sqlite_engine(self) -> Engine:
        pool = QueuePool if self._sqlite_file else StaticPool  # in-memory: one connection or the data is gone
        engine = create_engine(self.url, poolclass=pool,
                               connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (pysqlite's would be DEFERRED)
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
            if self._sqlite_file:
                _enable_wal(cur)
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("mirrorbook_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine

    @property
    def engine(self) -> Engine:
        if os.getpid() != self._pid:  # forked: never share the parent's pooled connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        return self._engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that holds the database-wide audit write lock until it commits."""
        with self._errors(), self.engine.connect() as conn:
            conn = conn.execution_options(mirrorbook_write=True)
            with conn.begin():
                if self.backend == "postgresql":
                    conn.execute(text(f"SET LOCAL lock_timeout = '{BUSY_TIMEOUT_S}s'"))
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_WRITE_LOCK_KEY})
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """One consistent snapshot for the whole transaction (a chain walk must not see half an append)."""
        with self._errors(), self.engine.connect() as conn:
            if self.backend == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except OperationalError as exc:
            raise AuditUnavailable(f"audit database {self.display_url}: {redact_text(str(exc.orig).strip())}",
                                   f"check that it is reachable and not held locked (> {BUSY_TIMEOUT_S}s), "
                                   f"or point {ENV_URL} elsewhere") from None

    def _insert(self, table: Table) -> postgresql.Insert | sqlite.Insert:
        """An INSERT in the dialect's own syntax (each has its ON CONFLICT), imported for the dialect in use."""
        if self.backend == "postgresql":
            from sqlalchemy.dialects import postgresql
            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite
        return sqlite.insert(table)

    def upsert(self, conn: Connection, table: Table, values: Mapping[str, Any], keys: Sequence[str]) -> None:
        """INSERT … ON CONFLICT (keys) DO UPDATE, in the dialect's own syntax."""
        stmt = self._insert(table).values(**values)
        conn.execute(stmt.on_conflict_do_update(index_elements=list(keys),
                                                set_={k: v for k, v in values.items() if k not in keys}))

    def upsert_many(self, conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
                    ) -> None:
        """`upsert` of many rows with the same columns, as one statement executed for all of them (a thousand
        groups' readiness positions are 150,000 rows: one statement each took minutes)."""
        if not rows:
            return
        stmt = self._insert(table)
        stmt = stmt.on_conflict_do_update(index_elements=list(keys),
                                          set_={k: stmt.excluded[k] for k in rows[0] if k not in keys})
        conn.execute(stmt, list(rows))

    def dispose(self) -> None:
        self._engine.dispose()
