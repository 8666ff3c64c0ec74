"""The devstack's Spark Connect server: the pinned pyspark's own `sbin/start-connect-server.sh`, kept warm
for the parity proofs.

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
import time
from pathlib import Path

import psutil
from pydantic import BaseModel

from mirrorbook.devstack import ports
from mirrorbook.devstack.errors import ProcessDied, ReadinessTimeout, ToolMissing
from mirrorbook.devstack.processes import ProcessRecord, died_error

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
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


class SparkConnectState(BaseModel):
    port: int
    process: ProcessRecord | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

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


def server_properties(port: int, work: Path, driver_memory_mb: int) -> dict[str, str]:
    """The devstack server's Spark settings: local[*] on 127.0.0.1:`port`, the Kafka source jars from the cache."""
    from mirrorbook.parity.submit import spark_kafka_jars  # pyarrow and friends: only when a server starts

    return {
        **server_settings(driver_memory_mb),
        "spark.jars": ",".join(spark_kafka_jars()),
        "spark.driver.bindAddress": HOST,
        "spark.driver.host": HOST,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{work / 'log4j2.properties'} "
                                         f"-Djava.io.tmpdir={work / 'tmp'}",
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
    }


def launch(java: str, state: SparkConnectState, run_dir: Path, log_dir: Path, *,
           driver_memory_mb: int) -> ProcessRecord:
    """Start the server through start-connect-server.sh (after checking its port).

    The script returns once the JVM runs (a few seconds); `wait_ready` waits for the server to answer.
    """
    home = spark_home()
    ports.require_free(state.port, "the Spark Connect server")
    work = run_dir / "spark"
    for sub in ("conf", "tmp", "warehouse"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    (work / "log4j2.properties").write_text(LOG4J2)
    props_file = work / "spark-connect.conf"
    props_file.write_text("".join(f"{k} {v}\n" for k, v in server_properties(state.port, work,
                                                                             driver_memory_mb).items()))
    pid_file = work / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"
    # We only launch when our record says the server is gone; a leftover pid file naming a recycled pid
    # that happens to be some java would make the script refuse to start.
    pid_file.unlink(missing_ok=True)
    env = {**os.environ, "SPARK_HOME": str(home), "JAVA_HOME": str(Path(java).resolve().parents[1]),
           "SPARK_LOCAL_IP": HOST, "SPARK_LOCAL_DIRS": str(work / "tmp"), "SPARK_CONF_DIR": str(work / "conf"),
           "SPARK_PID_DIR": str(work), "SPARK_LOG_DIR": str(log_dir), "SPARK_IDENT_STRING": IDENT}
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
    try:
        created = psutil.Process(pid).create_time()
    except psutil.Error:
        created = 0.0
    record = ProcessRecord(pid=pid, create_time=created, log=str(log),
                           cmd_summary=f"Spark Connect server: {SERVER_CLASS} ({MASTER}, {HOST}:{state.port})")
    if not record.alive():
        raise died_error(record, "Spark Connect server")
    return record


def wait_ready(state: SparkConnectState, timeout_s: float) -> None:
    """The gRPC port answers: the server opens it only once its Spark session is up."""
    assert state.process
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not state.process.alive():
            raise died_error(state.process, "Spark Connect server")
        if ports.wait_port_open(state.port, HOST):
            return
        time.sleep(0.3)
    raise ReadinessTimeout(f"The Spark Connect server did not answer on {state.url} within {timeout_s:.0f}s",
                           f"read {state.process.log}")
