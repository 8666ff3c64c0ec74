"""The devstack's Spark Connect server: the pinned pyspark's own `sbin/start-connect-server.sh`, kept warm
for the parity proofs — on `local[*]`, or on a Spark standalone cluster of the devstack's own (`--spark-workers N`:
a master and N workers, each its own JVM, and each executor another; the proofs' tasks run there).

The cluster's daemons are pyspark's own `bin/spark-class` (its wheel has no `sbin/start-master.sh`), which `exec`s
the JVM: the pid the stack records is the master's or worker's JVM. Everything binds to 127.0.0.1 (SPARK_LOCAL_IP):
the machine's hostname may resolve elsewhere. A worker's executors are its children: stopping the worker stops them
(its ExecutorRunner's shutdown hook), so `down` stops the server, then the workers, then the master.

The script daemonizes the server through `spark-daemon.sh`, whose pid file (kept in the run dir, not
/tmp) names the JVM itself (`nohup`, `nice`, `spark-submit` and `spark-class` all `exec`): the stack
records that pid with its start time, so `down` stops exactly the server it started, as it does the
brokers and workers. The server's settings go in a properties file in the run dir; an empty conf dir
keeps a user's spark-env.sh / spark-defaults.conf out of it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel

from mirrorbook.devstack import ports
from mirrorbook.devstack.errors import ProcessDied, ReadinessTimeout, ToolMissing
from mirrorbook.devstack.processes import ProcessRecord, died_error

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# What each standalone daemon needs for itself (Spark's default is 1 GiB each); executors get their own.
DAEMON_MEMORY = "256m"
# A worker offers room for this many executors: the Connect server's application holds one on each worker for as
# long as the server runs (standalone gives an application its executors for its life), and a spark-submit job on
# the same master (a proof through MIRRORBOOK_PARITY_URI) needs the other, or it would wait for cores forever.
EXECUTORS_PER_WORKER = 2
HOST = "127.0.0.1"
MASTER = "local[*]"
# The Spark provider's own connection type and default id (SparkConnectHook): what the runbooks look up.
CONN_TYPE = "spark_connect"
CONN_ID = "spark_connect_default"
# spark-daemon.sh names its pid and log files after this (default: $USER).
IDENT = "mirrorbook"
PYSPARK_INSTALL = "make install   (pins pyspark==4.3.0, whose wheel carries the server; pyspark-client alone has none)"
SCRIPT_TIMEOUT_S = 60.0

LOG4J2 = """# The devstack's Spark Connect server: warnings, plus the lines that say where it listens.
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n%ex
logger.server.name = org.apache.spark.sql.connect.service
logger.server.level = info
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


class SparkNode(BaseModel):
    """A daemon of the devstack's standalone cluster: its master, or one of its workers."""

    name: str  # spark-master | spark-worker-<n>
    port: int  # its RPC port (the master's is the cluster's spark:// address)
    ui_port: int  # its web UI, whose /json/ says what it runs
    process: ProcessRecord | None = None

    @property
    def ui(self) -> str:
        return f"http://{HOST}:{self.ui_port}"


class SparkConnectState(BaseModel):
    port: int
    process: ProcessRecord | None = None
    # On the stack's standalone cluster (None: local[*]): its master and workers, and the server's web UI, whose
    # status API (/api/v1/applications/...) says which executor ran each task.
    master: SparkNode | None = None
    workers: list[SparkNode] = []
    ui_port: int | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master.port}" if self.master else MASTER

    @property
    def ui(self) -> str | None:
        return f"http://{HOST}:{self.ui_port}" if self.ui_port else None

    def nodes(self) -> list[SparkNode]:
        """The cluster's daemons in starting order: the master, then its workers."""
        return [self.master, *self.workers] if self.master else []

    def ports(self) -> set[int]:
        return {self.port, *([self.ui_port] if self.ui_port else []), *(p for n in self.nodes()
                                                                        for p in (n.port, n.ui_port))}

    def processes(self) -> dict[str, ProcessRecord]:
        """The recorded processes in stopping order: the server (its application ends first), then the workers
        (each with its executors), then the master."""
        named = [("spark-connect", self.process), *((n.name, n.process) for n in reversed(self.nodes()))]
        return {name: proc for name, proc in named if proc is not None}

    def connection(self) -> dict[str, object]:
        """The Airflow connection, in SparkConnectHook's form (host without scheme; it adds `sc://`)."""
        return {"conn_type": CONN_TYPE, "host": HOST, "port": self.port}


def spark_home() -> Path:
    """The installed pyspark package, which is a Spark distribution (sbin/, jars/ with the Connect server)."""
    spec = importlib.util.find_spec("pyspark")
    home = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    if (home is None or not (home / "sbin" / "start-connect-server.sh").is_file()
            or not any((home / "jars").glob("spark-connect_*.jar"))):
        raise ToolMissing(f"No Spark Connect server in {home or 'this Python (pyspark is not installed)'}: "
                          "it needs pyspark's sbin/start-connect-server.sh and jars/spark-connect_*.jar",
                          PYSPARK_INSTALL)
    return home


def server_settings(driver_memory_mb: int) -> dict[str, str]:
    """The settings of a mirrorbook Spark Connect server wherever it runs: the devstack's and the
    docker-compose.yml service's (tests/unit/test_compose.py holds the two together)."""
    return {
        "spark.master": MASTER,
        "spark.driver.memory": f"{driver_memory_mb}m",
        # A taken port is an error to report, not a reason to listen on the next one (Spark's default).
        "spark.connect.grpc.port.maxRetries": "0",
        # The proofs' shuffles are a handful of partition pairs, not Spark's 200.
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
    }


def cluster_state(port: int, workers: int, free: Iterator[int]) -> SparkConnectState:
    """A server on `port`, on a cluster of `workers` workers (0: local[*]) whose ports are taken from `free`: the
    server's UI, then the master's RPC and UI ports, then each worker's."""
    if not workers:
        return SparkConnectState(port=port)
    ui_port = next(free)
    master = SparkNode(name="spark-master", port=next(free), ui_port=next(free))
    return SparkConnectState(port=port, ui_port=ui_port, master=master,
                             workers=[SparkNode(name=f"spark-worker-{i}", port=next(free), ui_port=next(free))
                                      for i in range(1, workers + 1)])


def cluster_ports(workers: int) -> int:
    """How many ports a server on a cluster of `workers` takes besides its own (cluster_state's)."""
    return 3 + 2 * workers if workers else 0


def executor_cores() -> int:
    """Each executor's cores: the machine's. The workers share this one machine, so an executor of fewer cores
    would leave tasks queued that the CPUs could run side by side (local[*] runs one task a core, too)."""
    return os.cpu_count() or 1


def cluster_settings(state: SparkConnectState, executor_memory_mb: int) -> dict[str, str]:
    """The server's settings on the stack's cluster ({} on local[*]): one executor on each worker, its status API
    on (which executor ran each task)."""
    if state.master is None:
        return {}
    cores = executor_cores()
    return {"spark.master": state.master_url, "spark.executor.cores": str(cores),
            "spark.cores.max": str(cores * len(state.workers)), "spark.executor.memory": f"{executor_memory_mb}m",
            "spark.ui.enabled": "true", "spark.ui.port": str(state.ui_port), "spark.port.maxRetries": "0"}


def daemon_args(state: SparkConnectState, node: SparkNode, run_dir: Path, executor_memory_mb: int) -> list[str]:
    """spark-class's arguments for a daemon of the cluster: its class, where it listens, and for a worker what it
    offers (EXECUTORS_PER_WORKER executors of the server's size) and its master."""
    assert state.master is not None
    args = ["--host", HOST, "--port", str(node.port), "--webui-port", str(node.ui_port)]
    if node is state.master:
        return [MASTER_CLASS, *args]
    return [WORKER_CLASS, *args, "--cores", str(EXECUTORS_PER_WORKER * executor_cores()),
            "--memory", f"{EXECUTORS_PER_WORKER * executor_memory_mb}m", "--work-dir", str(workers_dir(run_dir)),
            state.master_url]


def server_properties(port: int, work: Path, driver_memory_mb: int, cluster: dict[str, str] | None = None
                      ) -> dict[str, str]:
    """The devstack server's Spark settings: local[*] (or `cluster`'s master) on 127.0.0.1:`port`, the Kafka
    source jars from the cache."""
    from mirrorbook.parity.submit import spark_kafka_jars  # pyarrow and friends: only when a server starts

    return {
        **server_settings(driver_memory_mb), **(cluster or {}),
        "spark.jars": ",".join(spark_kafka_jars()),
        "spark.driver.bindAddress": HOST,
        "spark.driver.host": HOST,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{work / 'log4j2.properties'} "
                                         f"-Djava.io.tmpdir={work / 'tmp'}",
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
    }


def spark_env(java: str, work: Path, log_dir: Path) -> dict[str, str]:
    """The environment of every Spark JVM of the stack (server, master, workers, and through the workers their
    executors): pyspark's Spark, our Java, everything on 127.0.0.1, files in the run dir, an empty conf dir."""
    return {**os.environ, "SPARK_HOME": str(spark_home()), "JAVA_HOME": str(Path(java).resolve().parents[1]),
            "SPARK_LOCAL_IP": HOST, "SPARK_LOCAL_DIRS": str(work / "tmp"), "SPARK_CONF_DIR": str(work / "conf"),
            "SPARK_PID_DIR": str(work), "SPARK_LOG_DIR": str(log_dir), "SPARK_IDENT_STRING": IDENT,
            # The executors' Python for a Spark Connect client's Python function (a proof's batched reader, in
            # mapInArrow): the server's planner takes it from this variable, not from spark.pyspark.python. This
            # venv's, which has pyarrow and confluent-kafka — not whatever `python3` is first on PATH, seen lacking
            # pyarrow (the proof then read through the Kafka source).
            "PYSPARK_PYTHON": sys.executable}


def workers_dir(run_dir: Path) -> Path:
    """The cluster's workers' work dir: each executor's files and logs in <application id>/<executor id>/."""
    return run_dir / "spark" / "workers"


def workdir(run_dir: Path, log_dir: Path) -> Path:
    """The run dir's spark/ (conf, tmp, warehouse, the workers' work dir, the log4j2 config), made."""
    work = workers_dir(run_dir).parent
    for sub in ("conf", "tmp", "warehouse", "workers"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    (work / "log4j2.properties").write_text(LOG4J2)
    return work


def launch_node(java: str, state: SparkConnectState, node: SparkNode, run_dir: Path, log_dir: Path, *,
                executor_memory_mb: int) -> ProcessRecord:
    """Start a daemon of the cluster (after checking its ports): pyspark's `bin/spark-class`, which execs the
    daemon's JVM in this process, so the pid recorded is the JVM's. Its own session: it outlives the CLI call."""
    for port in (node.port, node.ui_port):
        ports.require_free(port, f"the Spark {node.name}")
    work = workdir(run_dir, log_dir)
    args = daemon_args(state, node, run_dir, executor_memory_mb)
    env = {**spark_env(java, work, log_dir), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
           # The daemons only schedule: C1 and SerialGC start them sooner on two cores (as the stack's brokers).
           "SPARK_DAEMON_JAVA_OPTS": f"-Dlog4j2.configurationFile=file:{work / 'log4j2.properties'} "
                                     "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
    log = log_dir / f"{node.name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(["bash", str(spark_home() / "bin" / "spark-class"), *args], env=env, cwd=work,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    return ProcessRecord.of(proc.pid, str(log), f"Spark {node.name}: {' '.join(args)}")


def status_json(url: str, timeout_s: float = 5.0) -> Any:
    """What a Spark web UI's JSON (a daemon's /json/, an application's /api/v1/...) says, or None while it does
    not answer."""
    import httpx

    try:
        return httpx.get(url, timeout=timeout_s).raise_for_status().json()
    except (httpx.HTTPError, ValueError):
        return None


def _check_alive(state: SparkConnectState, server: bool = True) -> None:
    """Each recorded daemon (and the server, unless not yet relaunched: its record may be a dead one's) runs."""
    for name, proc in state.processes().items():
        if (server or name != "spark-connect") and not proc.alive():
            raise died_error(proc, f"Spark {name}")


def wait_cluster(state: SparkConnectState, timeout_s: float, workers: bool = True) -> None:
    """Until the master answers and lists every worker ALIVE (each registered, its cores and memory offered); with
    `workers` False, until it answers (an application may register from then on)."""
    assert state.master is not None
    deadline = time.monotonic() + timeout_s
    alive = None
    while time.monotonic() < deadline:
        _check_alive(state, server=False)
        got = status_json(f"{state.master.ui}/json/")
        alive = int(got.get("aliveworkers", 0)) if isinstance(got, dict) else None
        if alive is not None and (not workers or alive >= len(state.workers)):
            return
        time.sleep(0.3)
    said = "did not answer" if alive is None else f"listed {alive} of {len(state.workers)} workers alive"
    raise ReadinessTimeout(f"The Spark master at {state.master_url} {said} within {timeout_s:.0f}s",
                           f"read {state.master.process.log if state.master.process else 'its log'} and the "
                           "workers' logs beside it")


def executors(state: SparkConnectState) -> list[dict[str, Any]]:
    """The server's application's executors as its status API lists them (the driver's entry is "driver"), [] on
    local[*] or while it does not answer."""
    apps = status_json(f"{state.ui}/api/v1/applications") if state.ui else None
    if not apps:
        return []
    got = status_json(f"{state.ui}/api/v1/applications/{apps[0]['id']}/executors")
    return got if isinstance(got, list) else []


def launch(java: str, state: SparkConnectState, run_dir: Path, log_dir: Path, *,
           driver_memory_mb: int, executor_memory_mb: int = 1024) -> ProcessRecord:
    """Start the server through start-connect-server.sh (after checking its port).

    The script returns once the JVM runs (a few seconds); `wait_ready` waits for the server to answer.
    """
    home = spark_home()
    ports.require_free(state.port, "the Spark Connect server")
    if state.ui_port:
        ports.require_free(state.ui_port, "the Spark Connect server's status API")
    work = workdir(run_dir, log_dir)
    props_file = work / "spark-connect.conf"
    props = server_properties(state.port, work, driver_memory_mb, cluster_settings(state, executor_memory_mb))
    props_file.write_text("".join(f"{k} {v}\n" for k, v in props.items()))
    pid_file = work / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"
    # We only launch when our record says the server is gone; a leftover pid file naming a recycled pid
    # that happens to be some java would make the script refuse to start.
    pid_file.unlink(missing_ok=True)
    env = spark_env(java, work, log_dir)
    script = home / "sbin" / "start-connect-server.sh"
    # Its own session: the server must outlive the CLI call (and the terminal) that started it.
    done = subprocess.run(["bash", str(script), "--properties-file", str(props_file)], env=env, cwd=work,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, start_new_session=True,
                          timeout=SCRIPT_TIMEOUT_S)
    # spark-daemon.sh's own log name: spark-$SPARK_IDENT_STRING-$command-$instance-$HOSTNAME.out
    log = log_dir / f"spark-{IDENT}-{SERVER_CLASS}-1-{socket.gethostname()}.out"
    if done.returncode != 0 or not pid_file.is_file():
        raise ProcessDied(f"{script} failed (exit {done.returncode}): {(done.stdout + done.stderr).strip()[-1500:]}",
                          f"read {log}")
    pid = int(pid_file.read_text().strip())
    record = ProcessRecord.of(pid, str(log), f"Spark Connect server: {SERVER_CLASS} ({state.master_url}, "
                              f"{HOST}:{state.port})")
    if not record.alive():
        raise died_error(record, "Spark Connect server")
    return record


def wait_ready(state: SparkConnectState, timeout_s: float) -> None:
    """The gRPC port answers (the server opens it only once its Spark session is up), and on a cluster its
    application has an executor on every worker (its first proof would otherwise wait for them)."""
    assert state.process
    deadline = time.monotonic() + timeout_s
    if state.master is not None:
        wait_cluster(state, timeout_s)
    while time.monotonic() < deadline:
        _check_alive(state)
        if ports.wait_port_open(state.port, HOST) and (
                sum(e["id"] != "driver" for e in executors(state)) >= len(state.workers)):
            return
        time.sleep(0.3)
    raise ReadinessTimeout(f"The Spark Connect server did not answer on {state.url}"
                           + (f" with an executor on each of its {len(state.workers)} workers" if state.workers else "")
                           + f" within {timeout_s:.0f}s", f"read {state.process.log}")
