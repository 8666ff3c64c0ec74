"""Finding a secured stack's secrets where they must never be: files (text, SQLite databases row by row, Parquet
cell by cell, anything else as bytes) and the command lines of running processes. Each hit names the file and
line (a database's dump line, a Parquet row) or the process, and which secret in which form."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path
from typing import Iterable, Iterator

import psutil

from mirrorbook.devstack import security


def needles(stack_dir: Path) -> dict[str, str]:
    """Every secret of the stack in every form it could leak in: as it is, base64, and base64 of `user:password`
    (an HTTP basic-auth header, a SASL PLAIN token)."""
    sec = security.Material(stack_dir).secrets()
    named = {f"SCRAM password of {u}": sec.password(u) for u in security.USERS}
    named["keystore password"] = sec.keystore_password.get_secret_value()
    named[f"Connect password of {security.CONNECT_USER}"] = sec.connect_password.get_secret_value()
    out: dict[str, str] = {}
    users = {**{f"SCRAM password of {u}": u for u in security.USERS},
             f"Connect password of {security.CONNECT_USER}": security.CONNECT_USER}
    for what, value in named.items():
        out[what] = value
        out[f"{what} (base64)"] = base64.b64encode(value.encode()).decode()
        if what in users:
            out[f"{what} (base64 of user:password)"] = base64.b64encode(f"{users[what]}:{value}".encode()).decode()
    return out


CHUNK = 10_000  # lines checked as one text: a needle (no line break in it) is in the chunk iff in one of its lines


def _read(path: Path) -> bytes:
    """The file's bytes, each hole in it (a sparse region, never written: zeros) read as one NUL. Kafka preallocates
    a 10 MB offset and time index for every partition's active segment, sparse: a secured stack holds 6 GB of them
    and 30 MB of data. A needle has no NUL, so it is in these bytes iff it is in the file, and no line changes its
    number (a hole holds no line break)."""
    parts: list[bytes] = []
    with path.open("rb") as f:
        fd, pos = f.fileno(), 0
        while True:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: nothing but a hole, or nothing, after pos
                return b"".join(parts)
            end = os.lseek(fd, start, os.SEEK_HOLE)
            chunk = os.pread(fd, end - start, start)
            if not chunk:  # cut short while read (a log being rolled): what was there is read
                return b"".join(parts)
            parts += [b"\0", chunk] if start > pos else [chunk]
            pos = start + len(chunk)


def _lines(path: Path, head: bytes, data: bytes | None = None) -> Iterator[str]:
    if head.startswith(b"SQLite format 3"):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            yield from db.iterdump()  # one line per row: XCom, rendered fields, audit events, snapshots, …
        finally:
            db.close()
        return
    if head.startswith(b"PAR1"):
        import pyarrow.parquet as pq  # compressed pages: read the cells, not the bytes

        for row in pq.read_table(path).to_pylist():
            yield repr(row)
        return
    yield from (_read(path) if data is None else data).decode("utf-8", errors="replace").splitlines()


def _file_hits(path: Path, secrets: dict[str, str]) -> list[str]:
    head = path.open("rb").read(16)
    data = None
    if not head.startswith((b"SQLite format 3", b"PAR1")) and all(v.isascii() for v in secrets.values()):
        # An ASCII needle is in the bytes iff it is in their text (decoding never merges an ASCII byte into
        # anything else): most files — logs, Kafka's segments — are ruled out without being decoded.
        data = _read(path)
        if not any(v.encode() in data for v in secrets.values()):
            return []
    hits: list[str] = []
    chunk: list[str] = []

    def check(first: int) -> None:
        if any(value in "\n".join(chunk) for value in secrets.values()):
            hits.extend(f"{path}:{n}: {what}" for n, line in enumerate(chunk, first)
                        for what, value in secrets.items() if value in line)

    n = 0
    for n, line in enumerate(_lines(path, head, data), 1):
        chunk.append(line)
        if len(chunk) == CHUNK:
            check(n - CHUNK + 1)
            chunk.clear()
    if chunk:
        check(n - len(chunk) + 1)
    return hits


def scan_files(roots: Iterable[Path], secrets: dict[str, str], skip: Iterable[Path] = ()) -> tuple[list[str], int]:
    """Hits as `file:line: which secret`, and how many files were read."""
    # No needle holds a line break (lines are checked in chunks) or a NUL (holes are read as one: `_read`).
    assert not any(any(c in v for c in "\0\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") for v in secrets.values())
    skipped = [p.resolve() for p in skip]
    hits: list[str] = []
    count = 0
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if not path.is_file() or path.is_symlink() or any(path.resolve().is_relative_to(s) for s in skipped):
                continue
            count += 1
            try:
                hits += _file_hits(path, secrets)
            except (OSError, sqlite3.Error) as exc:
                hits.append(f"{path}: could not be read ({exc})")
    return hits, count


def scan_processes(secrets: dict[str, str]) -> tuple[list[str], int]:
    """Hits in the command line of every process of this machine (a secret on a command line is seen by all)."""
    hits: list[str] = []
    count = 0
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        count += 1
        hits += [f"pid {proc.info['pid']} ({cmd[:120]}): {what}" for what, value in secrets.items() if value in cmd]
    return hits, count
