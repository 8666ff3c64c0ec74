"""Where a run's proofs run, chosen from plain values: what the run, the topology and the settings name, and
which of those connections exist (the Airflow side looks them up and passes what it found). The choice reads
nothing itself; only `ProofEngine.check` reaches out, to try the parity URI.

The Spark Connect connection is the run's `spark_connect` parameter, else the topology's
`spark_connect_connection_id`, else the default (the `spark_connect_conn_id` setting). Then the first row that
holds:

  that connection exists      spark-connect: the apps as clients of its server; never refused
  else a Spark connection      spark-submit to that connection's master; refused when the Spark Connect
                               connection was named (by the run or the topology), or when the master is not
                               local and no parity URI is set
  else                         local: spark-submit with master local[*] on this worker; refused when the
                               Spark Connect connection was named

A named connection that does not exist is a mistake, never a silent fall-back; the default's absence is not.
With a parity URI, a spark-submit's files go through it whatever the master (and it must be writable: `check`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mirrorbook.bounds import shown
from mirrorbook.errors import Refused
from mirrorbook.parity import staging
from mirrorbook.parity.submit import DEFAULT_MASTER, is_local

EngineKind = Literal["spark-connect", "spark-submit", "local"]
BY_RUN = "the run's spark_connect parameter"
BY_TOPOLOGY = "the topology's spark_connect_connection_id"


@dataclass(frozen=True)
class ConnectChoice:
    """The Spark Connect connection of a run's proofs: its id, who named it (None: nobody, it is the default,
    which may not exist — then the proofs run by spark-submit), and the default's id (said in a refusal)."""

    conn_id: str
    named_by: str | None
    default: str


def connect_choice(run: str | None, topology: str | None, default: str) -> ConnectChoice:
    """A run's `spark_connect` parameter (blank: not given) wins over the topology's, which wins over `default`."""
    if named := (run or "").strip():
        return ConnectChoice(named, BY_RUN, default)
    if topology:
        return ConnectChoice(topology, BY_TOPOLOGY, default)
    return ConnectChoice(default, None, default)


def submit_master(conn_type: str, host: str | None, port: int | None) -> str:
    """The master spark-submit uses for a Spark connection of these fields, as the Spark provider reads them."""
    if conn_type == "spark" and host and ("://" in host or not port):
        master = host
    else:
        master = f"{conn_type}://{host or ''}"
    return f"{master}:{port}" if port else master


@dataclass(frozen=True)
class ProofEngine:
    """Where the proofs run. `master`: the one the job is built for (local-only settings for a local one only;
    on a Spark Connect server the job's settings are a local master's). `url`: the server's sc:// URL
    (spark-connect only). `uri`: the parity URI a spark-submit's files go through (never on a server)."""

    kind: EngineKind
    connect: ConnectChoice
    master: str = DEFAULT_MASTER
    url: str | None = None
    uri: str | None = None

    def describe(self) -> str:
        """As the verdict records it."""
        if self.kind == "spark-connect":
            return f"spark-connect ({self.connect.conn_id})"
        return f"spark-submit ({self.master}{', through ' + self.uri if self.uri else ''})"

    def refusal(self) -> Refused | None:
        """Why a run must not start with this engine, or None (the parity URI's reach is `check`'s to try)."""
        if self.kind == "spark-connect":
            return None
        if self.connect.named_by is not None:
            return Refused(f"parity=spark: the Spark Connect connection {shown(self.connect.conn_id)} named by "
                           f"{self.connect.named_by} does not exist",
                           "create it (connection type spark_connect, host sc://HOST:PORT), name another, "
                           "or run with parity=off")
        if self.uri is None and not is_local(self.master):
            return Refused(f"parity=spark would run the proofs by spark-submit on master {shown(self.master)}, whose "
                           "driver cannot read this worker's snapshot files nor return its verdict to them",
                           f"configure a Spark Connect connection ({self.connect.default!r}, type spark_connect) — "
                           f"the proofs then need no shared disk — or set {staging.ENV} to a location "
                           "this worker and the cluster both reach (s3a://…, hdfs://…, file:/// on a shared mount), "
                           "or run with parity=off")
        return None

    def check(self) -> None:
        """Refuse (Refused), before anything changes, a run whose proofs could not run here: `refusal`, then a
        parity URI this worker cannot write to."""
        if (refused := self.refusal()) is not None:
            raise refused
        if self.uri is not None:
            try:
                staging.check(self.uri)
            except staging.StagingError as exc:
                raise Refused(f"parity=spark by spark-submit on master {shown(self.master)}: {exc.message}",
                              exc.hint) from exc


def choose(connect: ConnectChoice, connect_url: str | None, spark_master: str | None,
           parity_uri: str | None) -> ProofEngine:
    """The engine, from `connect` and what exists: `connect_url`, the sc:// URL of `connect.conn_id` (None: no
    such connection); `spark_master`, the Spark connection's master (None: no Spark connection); `parity_uri`
    (None: unset)."""
    if connect_url is not None:
        return ProofEngine("spark-connect", connect, url=connect_url)
    if spark_master is None:
        return ProofEngine("local", connect, uri=parity_uri)
    return ProofEngine("spark-submit", connect, master=spark_master, uri=parity_uri)
