"""spark-submit to a cluster: a proof's files go through a URI that this worker and the cluster both reach.

A Spark driver on YARN, Kubernetes or a standalone cluster cannot open a path of the Airflow worker, nor
can the worker open one of the driver's. With `MIRRORBOOK_PARITY_URI` set (`s3a://bucket/mirrorbook`,
`hdfs://namenode/mirrorbook`, `file:///mnt/shared/mirrorbook` for a mount both sides have) a
spark-submit proof is staged there:

- `stage` copies the snapshots the task wrote to `<URI>/<dag>/<run>/<task>/snapshot/` and rewrites the
  job's arguments to those URIs; its results and its JSON summary go under the same prefix, written by
  the driver through Hadoop's FileSystem. Kafka client options (secrets) never go to the URI: they ride
  with the job as a spark-submit `--files` entry, which the cluster manager ships beside the driver.
- `fetch` reads the summary back through the URI (pyarrow's filesystems: S3, HDFS, GCS, local), copies
  the results into the task's own directory and returns the verdict with local paths, as a local run
  leaves them — the audit and the report read nothing else.

`s3a://` and `s3n://` are Hadoop's names for S3; this side reads them as `s3://` (credentials from the
usual AWS environment or config). The staged files are left in place as evidence.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from pydantic import BaseModel

from mirrorbook import settings
from mirrorbook.bounds import shown
from mirrorbook.errors import MirrorbookError
from mirrorbook.parity.submit import ParitySummary, SparkJobError, SparkSubmitSpec

ENV = settings.PARITY_URI.env
INPUTS = ("--expected", "--actual", "--watermarks", "--ranges", "--boundaries")
OPTIONS_FILE = "--kafka-options-file"
HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's S3 connectors, as pyarrow names the store
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


class StagingError(MirrorbookError):
    """The parity URI cannot be used (malformed, unsupported, or unreachable from this worker)."""


def parity_uri(env: Mapping[str, str] | None = None) -> str | None:
    """`MIRRORBOOK_PARITY_URI`, without a trailing slash; None when unset or blank."""
    value = (settings.PARITY_URI.get(env) or "").rstrip("/")
    return value or None


def filesystem(uri: str) -> tuple[Any, str]:
    """The pyarrow filesystem of `uri` and the path within it."""
    import pyarrow.fs as pafs

    match = _SCHEME.match(uri)
    if not match:
        raise StagingError(f"{ENV}={shown(uri)} is not a URI", "give a scheme: s3a://…, hdfs://…, file:///…")
    scheme = match.group(1).lower()
    try:
        return pafs.FileSystem.from_uri(HADOOP_SCHEMES.get(scheme, scheme) + uri[len(scheme):])
    except (ValueError, OSError) as exc:
        raise StagingError(f"{ENV}={shown(uri)} cannot be opened from this worker: {exc}",
                           "use a scheme pyarrow reads here (s3a/s3, hdfs with libhdfs, gs, file)") from exc


def check(uri: str) -> None:
    """Refuse a URI this worker cannot write to, before a run changes anything."""
    fs, path = filesystem(uri)
    try:
        fs.create_dir(path, recursive=True)
    except OSError as exc:
        raise StagingError(f"{ENV}={shown(uri)} is not writable from this worker: {exc}",
                           "create the location (or grant this worker write access), or unset it") from exc


class Staged(BaseModel):
    """A job staged through the URI: `job` is what spark-submit runs, `local` the job as written here."""

    job: SparkSubmitSpec
    local: SparkSubmitSpec
    base: str  # <URI>/<key>: snapshot/, result/, summary.json


def stage(spec: SparkSubmitSpec, uri: str, key: str) -> Staged:
    """Copy the job's snapshot files to `<uri>/<key>/snapshot/` and point its arguments there."""
    import pyarrow.fs as pafs

    base = f"{uri.rstrip('/')}/{key.strip('/')}"
    fs, root = filesystem(base)
    fs.create_dir(f"{root}/snapshot", recursive=True)
    args, files, it = [], list(spec.files), iter(spec.application_args)
    for arg in it:
        if arg in INPUTS:
            local = next(it)
            name = os.path.basename(local)
            pafs.copy_files(local, f"{root}/snapshot/{name}", destination_filesystem=fs)
            args += [arg, f"{base}/snapshot/{name}"]
        elif arg == OPTIONS_FILE:  # secrets: shipped with the job (--files), never to the URI
            local = next(it)
            files.append(local)
            args += [arg, os.path.basename(local)]
        elif arg == "--output":
            next(it)
            args += [arg, f"{base}/result"]
        elif arg == "--summary":
            next(it)
            args += [arg, f"{base}/summary.json"]
        else:
            args.append(arg)
    job = spec.model_copy(update={"application_args": args, "files": files})
    return Staged(job=job, local=spec, base=base)


def fetch(staged: Staged, ended: str | None = None) -> ParitySummary:
    """The job's summary, read through the URI, with its results copied into the task's directory and
    its paths made local. SparkJobError when the job left none (`ended`: how spark-submit ended)."""
    import pyarrow.fs as pafs

    fs, root = filesystem(staged.base)
    summary_dir = f"{root}/summary.json"  # written by the driver through Spark: a directory, _SUCCESS last
    parts = [] if fs.get_file_info(f"{summary_dir}/_SUCCESS").type == pafs.FileType.NotFound else \
        sorted(f.path for f in fs.get_file_info(pafs.FileSelector(summary_dir))
               if os.path.basename(f.path).startswith("part-"))
    if not parts:
        raise SparkJobError(f"{staged.job.name} left no summary at {staged.base}/summary.json"
                            + (f" ({ended})" if ended else ""), "see the spark-submit output above")
    with fs.open_input_stream(parts[0]) as fh:
        summary = ParitySummary.model_validate_json(fh.read())
    local_result = staged.local.output_dir / "result"
    outputs = {}
    for name, remote in summary.outputs.items():
        src = remote[len(staged.base) + 1:] if remote.startswith(staged.base + "/") else None
        if src is None:
            raise SparkJobError(f"{staged.job.name} reported an output outside {staged.base}: {remote}")
        dst = staged.local.output_dir / src
        dst.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(f"{root}/{src}", str(dst), source_filesystem=fs)
        outputs[name] = str(dst)
    local = summary.model_copy(update={"output": str(local_result), "outputs": outputs, "staged_at": staged.base})
    staged.local.summary_path.write_text(local.model_dump_json(indent=2))
    return local
