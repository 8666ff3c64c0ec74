"""The scanner the zero-secrets tests trust: it finds a planted secret in each kind of file it reads, and names the
file and line; a clean tree gives no hit (so a pass of those tests means something)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.secrets_scan import scan_files

SECRETS = {"password": "s3cr3t-Pa55", "password (base64)": "czNjcjN0LVBhNTU="}


def test_a_planted_secret_is_found_in_text_sqlite_parquet_and_bytes_by_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "task.log").write_text("started\nconnecting\nsasl password=s3cr3t-Pa55 sent\ndone\n")
    db = sqlite3.connect(tmp_path / "airflow.db")
    db.execute("create table xcom (value text)")
    db.executemany("insert into xcom values (?)", [("fine",), ("czNjcjN0LVBhNTU=",)])
    db.commit()
    db.close()
    pq.write_table(pa.table({"cell": ["a", "b", "x s3cr3t-Pa55 y"]}), tmp_path / "out.parquet")
    (tmp_path / "segment.bin").write_bytes(b"\x00\xff" * 100 + b"s3cr3t-Pa55" + b"\x00")
    (tmp_path / "skipped").mkdir()
    (tmp_path / "skipped" / "keystore.cfg").write_text("s3cr3t-Pa55\n")

    hits, files = scan_files([tmp_path], SECRETS, skip=[tmp_path / "skipped"])

    assert files == 4
    assert f"{tmp_path / 'task.log'}:3: password" in hits
    assert any(h.startswith(f"{tmp_path / 'airflow.db'}:") and h.endswith(": password (base64)") for h in hits), hits
    assert any(h.startswith(f"{tmp_path / 'out.parquet'}:3: password") for h in hits), hits
    assert any(h.startswith(f"{tmp_path / 'segment.bin'}:1: password") for h in hits), hits
    assert not any("keystore.cfg" in h for h in hits)
    assert len(hits) == 4, hits


def test_a_clean_tree_has_no_hit(tmp_path: Path) -> None:
    (tmp_path / "task.log").write_text("password=***\n" * 1000)
    assert scan_files([tmp_path], SECRETS) == ([], 1)


def test_lines_are_checked_in_chunks_yet_each_hit_names_its_own_line(tmp_path: Path) -> None:
    """Lines go through in chunks of CHUNK; a hit on a chunk's first and last line, and beyond the first chunk,
    still names its line — in a text file and in a database's dump."""
    from tests.secrets_scan import CHUNK

    where = [1, CHUNK, CHUNK + 1, 2 * CHUNK + 7]
    lines = ["s3cr3t-Pa55" if n in where else f"line {n}" for n in range(1, 2 * CHUNK + 10)]
    (tmp_path / "big.log").write_text("\n".join(lines) + "\n")
    db = sqlite3.connect(tmp_path / "big.db")
    db.execute("create table t (v text)")
    db.executemany("insert into t values (?)", [(v,) for v in lines])
    db.commit()
    db.close()
    dump = list(sqlite3.connect(tmp_path / "big.db").iterdump())

    hits, files = scan_files([tmp_path], SECRETS)

    assert files == 2
    assert sorted(h for h in hits if "big.log" in h) == sorted(f"{tmp_path / 'big.log'}:{n}: password" for n in where)
    in_dump = [n for n, line in enumerate(dump, 1) if "s3cr3t-Pa55" in line]
    assert len(in_dump) == len(where)
    assert sorted(h for h in hits if "big.db" in h) == sorted(f"{tmp_path / 'big.db'}:{n}: password" for n in in_dump)


def test_holes_in_a_sparse_file_are_not_read_yet_a_secret_after_them_is_found_on_its_line(tmp_path: Path) -> None:
    """Kafka's preallocated indexes are sparse: their holes are zeros, never read; what is written around them is
    read, its lines keep their numbers, and a secret cut in two by a hole is no secret."""
    from tests.secrets_scan import _read

    path = tmp_path / "00000000000000000000.index"
    with path.open("wb") as f:
        f.write(b"first\ns3cr3t-")  # the start of the secret, then 64 MB never written, then its end
        f.seek(64 << 20)
        f.write(b"Pa55\nsecond\nkey s3cr3t-Pa55\n")
        f.truncate(128 << 20)
    read = _read(path)
    assert len(read) < 1 << 20  # the holes were not read
    assert read.count(b"\n") == path.read_bytes().count(b"\n") == 4
    hits, files = scan_files([tmp_path], SECRETS)
    assert (hits, files) == ([f"{path}:4: password"], 1)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.tuples(st.integers(0, 3 << 20), st.binary(min_size=1, max_size=64)), max_size=8),
       needle=st.binary(min_size=1, max_size=6).filter(lambda b: b"\0" not in b))
def test_a_needle_is_in_the_read_bytes_iff_it_is_in_the_file(tmp_path: Path, writes, needle: bytes) -> None:
    from tests.secrets_scan import _read

    path = tmp_path / "sparse"
    with path.open("wb") as f:
        for at, data in writes:
            f.seek(at)
            f.write(data)
    whole = path.read_bytes()
    assert (needle in _read(path)) == (needle in whole)
    assert _read(path).count(b"\n") == whole.count(b"\n")
