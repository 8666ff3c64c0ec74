"""Every audit test runs on SQLite and on a real PostgreSQL server started for the session.

No PostgreSQL here is a test failure, not a skip: CI must show it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from sqlalchemy import create_engine, text

from mirrorbook.audit import AuditStore
from tests.audit.pgcluster import PgCluster, PgUnavailable


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    try:
        cluster = PgCluster()
        cluster.start()
    except (PgUnavailable, OSError, TimeoutError) as exc:
        pytest.fail(f"PostgreSQL is required for the audit tests and could not be started: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}"
    return request.getfixturevalue("pg_cluster").new_schema_url()


@pytest.fixture
def store(audit_url: str) -> Iterator[AuditStore]:
    s = AuditStore(audit_url)
    yield s
    s.close()


@pytest.fixture
def raw(audit_url: str) -> Callable[..., list[Any]]:
    """Run SQL behind the store's back (tampering, inspection); returns the rows of a SELECT."""

    def run(sql: str, **params: Any) -> list[Any]:
        engine = create_engine(audit_url)
        try:
            with engine.begin() as conn:
                result = conn.execute(text(sql), params)
                return list(result) if result.returns_rows else []
        finally:
            engine.dispose()

    return run
