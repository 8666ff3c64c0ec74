"""docker-compose.yml against what the devstack runs, so the two deployments cannot drift apart.

Pure parsing (PyYAML, no Docker): the Kafka version, the broker settings, the Connect workers and
MM2 connector configs, the Spark Connect server, the Airflow connections and the topology file compose
points Airflow at.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from mirrorbook.devstack import config, spark, stack
from mirrorbook.maven import versions
from mirrorbook.topology import FlowSpec, Topology, load_topology

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
KAFKA_SERVICES = {"A": "kafka-a", "B": "kafka-b"}
CONNECT_SERVICES = {"B": "connect-b", "A": "connect-a"}
# Broker properties compose sets its own way: listeners for the compose network and the host, a static
# controller quorum (what the image's launch script formats), the image's data dir.
BROKER_KEYS_PER_DEPLOYMENT = {"listeners", "advertised.listeners", "controller.quorum.voters",
                              "listener.security.protocol.map", "log.dirs"}
# Worker properties that name where the worker runs.
WORKER_KEYS_PER_DEPLOYMENT = {"bootstrap.servers", "listeners", "rest.advertised.host.name", "rest.advertised.port"}
BOOTSTRAP_KEYS = {"source.cluster.bootstrap.servers", "target.cluster.bootstrap.servers"}
SPARK_CONNECT_SERVICE = "spark-connect"
SPARK_JARS_SERVICE = "spark-connect-jars"


# -- loading ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def docker_script(name: str) -> ModuleType:
    """A script of docker/ (not a package), loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, REPO / "docker" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def render() -> ModuleType:
    return docker_script("render_configs")


def env(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {k: str(v) for k, v in raw.items()}


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def published(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port of `ports: ["HOST:CONTAINER"]`."""
    out = {}
    for spec in service.get("ports", []):
        host, container = str(spec).rsplit(":", 2)[-2:]
        out[int(container)] = int(host)
    return out


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> repo path of the service's bind mounts (`./x:/y[:ro]`)."""
    out = {}
    for v in service.get("volumes", []):
        parts = str(v).split(":")
        if parts[0].startswith("."):
            out[parts[1]] = (REPO / parts[0]).resolve()
    return out


def host_path(service: dict[str, Any], container_path: str) -> Path:
    """The repo file a container path of `service` comes from, through its bind mounts."""
    for target, source in sorted(bind_mounts(service).items(), key=lambda kv: -len(kv[0])):
        try:
            rel = PurePosixPath(container_path).relative_to(target)
        except ValueError:
            continue
        return source / rel
    raise AssertionError(f"{container_path} is not inside a bind mount of the service")


def properties(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def spark_confs(service: dict[str, Any]) -> dict[str, str]:
    """The `--conf key=value` settings of a Spark launch script's command line."""
    cmd = command(service)
    pairs = [cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf"]
    assert all(len(p) == 2 for p in pairs), cmd
    return dict(pairs)


def named_volumes(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> volume name of the service's named volumes (`name:/y[:ro]`)."""
    out = {}
    for v in service.get("volumes", []):
        parts = str(v).split(":")
        if not parts[0].startswith((".", "/")):
            out[parts[1]] = parts[0]
    return out


def kafka_env_to_property(name: str) -> str:
    """The apache/kafka image's rule: KAFKA_ dropped; `_` -> `.`, `__` -> `_`, `___` -> `-`; lower case."""
    body = name[len("KAFKA_"):]
    body = re.sub(r"(?<!_)_(?!_)", ".", body).replace("___", "-").replace("__", "_")
    return body.lower()


def airflow_connections(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k[len("AIRFLOW_CONN_"):].lower(): json.loads(v) for k, v in env(service).items()
            if k.startswith("AIRFLOW_CONN_")}


@pytest.fixture(scope="module")
def airflow(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return services["airflow-scheduler"]


@pytest.fixture(scope="module")
def topology(airflow: dict[str, Any]) -> Topology:
    return load_topology(host_path(airflow, env(airflow)["MIRRORBOOK_TOPOLOGY"]))


# -- images and services ---------------------------------------------------------------------------------

def test_every_component_has_a_service(services):
    for name in ("kafka-a", "kafka-b", "connect-b", "connect-a", "postgres", "airflow-api-server",
                 "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "spark-master", "spark-worker",
                 SPARK_CONNECT_SERVICE, SPARK_JARS_SERVICE):
        assert name in services, f"docker-compose.yml has no service {name}"
    assert services["connect-a"].get("profiles") == ["reverse"], "the B->A worker is optional (profile reverse)"
    # Airflow's spark_connect_default always names it: it cannot sit behind a profile.
    assert "profiles" not in services[SPARK_CONNECT_SERVICE] and "profiles" not in services[SPARK_JARS_SERVICE]


def test_kafka_images_are_the_devstack_version(services):
    kafka_images = {name: s["image"] for name, s in services.items()
                    if str(s.get("image", "")).startswith("apache/kafka")}
    assert {"kafka-a", "kafka-b", "connect-b", "connect-a", "kafka-init"} <= set(kafka_images)
    for name, image in kafka_images.items():
        assert image == f"apache/kafka:{versions.KAFKA_VERSION}", f"{name} runs {image}"


def test_spark_image_matches_pyspark(services):
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"] == f"apache/spark:{versions.SPARK_VERSION}"
    # The Connect server: the pinned pyspark's Spark, the Scala of the Kafka source jars, a Python.
    tag = services[SPARK_CONNECT_SERVICE]["image"].split(":", 1)[1].split("-")
    assert services[SPARK_CONNECT_SERVICE]["image"].startswith("apache/spark:")
    assert tag[:2] == [versions.SPARK_VERSION, f"scala{versions.SCALA_BINARY_VERSION}"] and "python3" in tag


def test_airflow_image_is_built_on_airflow_332(services, compose):
    dockerfile = REPO / compose["x-airflow-common"]["build"]["dockerfile"]
    text = dockerfile.read_text()
    assert "ARG AIRFLOW_VERSION=3.3.2" in text and "FROM apache/airflow:${AIRFLOW_VERSION}" in text
    assert "requirements.lock" in text and "pip install" in text
    # The wheel, not the source tree: built in a stage of its own, installed without dependencies over the lock,
    # its DAG files written into the image's DAG folder.
    assert "python -m build" in text and "pip install --no-cache-dir --no-deps /opt/mirrorbook/dist/mirrorbook-" in text
    assert "mirrorbook dags install /opt/airflow/dags" in text and "-e ." not in text
    lock = (REPO / "requirements.lock").read_text()
    assert "apache-airflow==3.3.2" in lock
    for name in ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["image"] == "mirrorbook-airflow:3.3.2"
    assert services["postgres"]["image"].startswith("postgres:")


# -- Kafka brokers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("alias", ["A", "B"])
def test_broker_settings_match_the_devstack(services, alias):
    e = env(services[KAFKA_SERVICES[alias]])
    props = {kafka_env_to_property(k): v for k, v in e.items() if k.startswith("KAFKA_") and k != "KAFKA_HEAP_OPTS"}
    devstack = config.broker_properties(9092, 9093, Path("/data"))
    for key, value in devstack.items():
        if key in BROKER_KEYS_PER_DEPLOYMENT:
            continue
        assert props.get(key) == config._prop(value), f"{KAFKA_SERVICES[alias]}: {key}"
    assert e["CLUSTER_ID"] and len(e["CLUSTER_ID"]) == 22


def test_brokers_have_distinct_ids_and_consistent_listeners(services, topology):
    ids = {env(services[s])["CLUSTER_ID"] for s in KAFKA_SERVICES.values()}
    assert len(ids) == 2, "A and B are two clusters: two cluster ids"
    host_ports = set()
    for alias, name in KAFKA_SERVICES.items():
        e = env(services[name])
        listeners = dict(x.split("://") for x in e["KAFKA_LISTENERS"].split(","))
        advertised = dict(x.split("://") for x in e["KAFKA_ADVERTISED_LISTENERS"].split(","))
        protocols = dict(p.split(":") for p in e["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        assert set(listeners) <= set(protocols), f"{name}: a listener without a security protocol"
        # Compose clients reach the broker where the topology says; host clients on the published port.
        assert advertised["PLAINTEXT"] == topology.clusters[alias].bootstrap_servers
        assert advertised["PLAINTEXT"] == f"{name}:{listeners['PLAINTEXT'].rsplit(':', 1)[1]}"
        host_port = int(advertised["PLAINTEXT_HOST"].rsplit(":", 1)[1])
        assert advertised["PLAINTEXT_HOST"].startswith("localhost:")
        assert listeners["PLAINTEXT_HOST"] == f":{host_port}"
        assert published(services[name]) == {host_port: host_port}
        assert e["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"1@{name}:{listeners['CONTROLLER'].rsplit(':', 1)[1]}"
        host_ports.add(host_port)
    assert len(host_ports) == 2


def test_canary_topic_is_created_on_every_source(services, topology):
    script = " ".join(command(services["kafka-init"]))
    assert stack.CANARY_TOPIC in script
    for flow in topology.flows:
        assert topology.clusters[flow.source].bootstrap_servers in script


# -- Connect and MM2 -------------------------------------------------------------------------------------

def test_generated_connect_files_are_current(render):
    stale = render.stale(render.rendered())
    assert not stale, f"re-run `python docker/render_configs.py`: stale {[str(p.relative_to(REPO)) for p in stale]}"


@pytest.mark.parametrize("alias", ["B", "A"])
def test_workers_match_the_devstack(services, topology, render, alias):
    service = services[CONNECT_SERVICES[alias]]
    cmd = command(service)
    assert cmd[0].endswith("/connect-distributed.sh")
    props = properties(host_path(service, cmd[1]).read_text())
    url = urlsplit(topology.connect_clusters[alias].url)
    devstack = config.worker_properties(alias, "x:1", url.port, config.StackSettings())
    for key, value in devstack.items():
        if key not in WORKER_KEYS_PER_DEPLOYMENT:
            assert props.get(key) == config._prop(value), f"{CONNECT_SERVICES[alias]}: {key}"
    # Bootstrapped on the worker's own (target) cluster; reachable where the topology says.
    assert props["bootstrap.servers"] == topology.clusters[alias].bootstrap_servers
    assert url.hostname == CONNECT_SERVICES[alias] == props["rest.advertised.host.name"]
    assert props["listeners"] == f"http://0.0.0.0:{url.port}" and props["rest.advertised.port"] == str(url.port)
    assert url.port in published(service)
    assert service["healthcheck"]["test"][-1] == str(url.port)


def flow_connectors(services: dict[str, Any], flow: FlowSpec) -> dict[str, dict[str, str]]:
    """name -> config the init service of the flow's Connect cluster registers."""
    worker = CONNECT_SERVICES[flow.connect_cluster]
    init = services[f"{worker}-init"]
    cmd = command(init)
    assert cmd[cmd.index("--url") + 1] == f"http://{worker}:8083"
    files: list[Path] = []
    for arg in cmd[cmd.index("--url") + 2:]:
        p = host_path(init, arg)
        files.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    specs = [json.loads(f.read_text()) for f in files]
    return {s["name"]: s["config"] for s in specs}


@pytest.mark.parametrize("flow_name", ["A->B", "B->A"])
def test_connectors_match_the_devstack(services, topology, render, flow_name):
    flow = topology.flow(flow_name)
    registered = flow_connectors(services, flow)
    assert set(registered) == {name for _, name in flow.connectors.items()}
    assert set(registered) == {f"{flow_name}.MirrorSourceConnector", f"{flow_name}.MirrorCheckpointConnector",
                               f"{flow_name}.MirrorHeartbeatConnector"}
    devstack = config.connector_configs(flow, {"A": "a:1", "B": "b:1"}, config.Mm2Settings())
    ignored = BOOTSTRAP_KEYS | set(render.INTERVAL_KEYS)
    for name, expected in devstack.items():
        got = registered[name]
        assert set(got) == set(expected), f"{name}: keys differ"
        for key in set(expected) - ignored:
            assert got[key] == expected[key], f"{name}: {key}"
        # The addresses are the compose ones of the topology.
        assert got["source.cluster.bootstrap.servers"] == topology.clusters[flow.source].bootstrap_servers
        assert got["target.cluster.bootstrap.servers"] == topology.clusters[flow.target].bootstrap_servers
    source = registered[flow.connector("source")]
    assert source["connector.class"] == "org.apache.kafka.connect.mirror.MirrorSourceConnector"
    assert (source["source.cluster.alias"], source["target.cluster.alias"]) == (flow.source, flow.target)
    assert source["replication.policy.class"].endswith("DefaultReplicationPolicy")
    assert source["key.converter"] == source["value.converter"] == source["header.converter"] == config.BYTES


def test_init_waits_for_its_worker_and_the_canaries(services):
    for worker in CONNECT_SERVICES.values():
        deps = services[f"{worker}-init"]["depends_on"]
        assert deps[worker]["condition"] == "service_healthy"
        assert deps["kafka-init"]["condition"] == "service_completed_successfully"
    assert services["connect-a-init"].get("profiles") == ["reverse"]


# -- Spark Connect ---------------------------------------------------------------------------------------

def test_spark_connect_server_matches_the_devstack(services):
    service = services[SPARK_CONNECT_SERVICE]
    assert command(service)[0] == "/opt/spark/sbin/start-connect-server.sh"
    assert env(service)["SPARK_NO_DAEMONIZE"], "in the foreground: the container lives as long as the server"
    confs = spark_confs(service)
    devstack = spark.server_settings(config.StackSettings().spark_driver_memory_mb)
    for key, value in devstack.items():
        assert confs.get(key) == value, f"{SPARK_CONNECT_SERVICE}: {key}"
    assert confs["spark.sql.shuffle.partitions"] == "4"
    # Reachable from the other containers and the host on the port it listens on.
    port = int(confs["spark.connect.grpc.binding.port"])
    assert confs["spark.connect.grpc.binding.address"] == "0.0.0.0"
    assert published(service) == {port: port}
    assert service["hostname"] == SPARK_CONNECT_SERVICE
    assert service["healthcheck"]["test"][-1].endswith(f"/{port}")


def test_spark_connect_has_the_devstack_kafka_jars(services, compose):
    service, init = services[SPARK_CONNECT_SERVICE], services[SPARK_JARS_SERVICE]
    jars = [PurePosixPath(j) for j in spark_confs(service)["spark.jars"].split(",")]
    # The jars versions.py pins (spark-sql-kafka 4.2.0 with token provider 4.0.0), named as Maven names them.
    assert sorted(j.name for j in jars) == sorted(f"{a}-{v}.jar" for _, a, v in
                                                  (c.split(":") for c in versions.spark_kafka_coordinates()))
    # ... in a volume that the one-shot service fills from the Airflow image's cache, which the devstack's
    # own resolver (maven.spark_kafka_libs) filled at build time, before the server starts.
    volume = named_volumes(service)[str(jars[0].parent)]
    assert {j.parent for j in jars} == {jars[0].parent} and volume in compose["volumes"]
    assert any(str(v).endswith(":ro") for v in service["volumes"])
    target = next(path for path, name in named_volumes(init).items() if name == volume)
    script = " ".join(command(init)).replace("$$", "$")  # compose's escape of a literal $
    assert "spark_kafka_libs()" in script and f"cp \"$libs\"/*.jar {target}/" in script
    assert init["image"] == compose["x-airflow-common"]["image"]
    assert service["depends_on"][SPARK_JARS_SERVICE]["condition"] == "service_completed_successfully"
    # The mount point exists in the image, owned by the airflow user (a new volume takes its owner).
    dockerfile = (REPO / compose["x-airflow-common"]["build"]["dockerfile"]).read_text()
    assert f"mkdir -p {target}" in dockerfile and "chown -R airflow:0 /opt/mirrorbook" in dockerfile


# -- Airflow ---------------------------------------------------------------------------------------------

def test_topology_file_is_the_sample_and_valid(airflow, topology):
    assert host_path(airflow, env(airflow)["MIRRORBOOK_TOPOLOGY"]) == REPO / "include" / "mirrorbook" / "topology.yaml"
    assert topology.flow_names() == ["A->B", "B->A"]


def test_airflow_connections_match_the_topology(airflow, topology):
    conns = airflow_connections(airflow)
    for alias, spec in topology.clusters.items():
        conn = conns[spec.connection_id]
        assert conn["conn_type"] == "kafka"
        assert conn["extra"]["bootstrap.servers"] == spec.bootstrap_servers
    for alias, spec in topology.connect_clusters.items():
        conn = conns[spec.connection_id]
        url = urlsplit(spec.url)
        assert conn["conn_type"] == "kafka_connect"
        assert (conn["host"], conn["port"], conn.get("schema", "http")) == (url.hostname, url.port, url.scheme)
    assert conns["spark_default"]["conn_type"] == "spark"


def test_spark_connect_connection_names_the_server(airflow, services):
    """The same connection the devstack writes (type, id, form), pointing at the compose service."""
    conn = airflow_connections(airflow)[spark.CONN_ID]
    port = int(spark_confs(services[SPARK_CONNECT_SERVICE])["spark.connect.grpc.binding.port"])
    assert set(conn) == set(spark.SparkConnectState(port=port).connection())
    assert conn == {"conn_type": spark.CONN_TYPE, "host": SPARK_CONNECT_SERVICE, "port": port}


def test_every_airflow_component_shares_one_configuration(services):
    names = ["airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"]
    envs = [env(services[n]) for n in names]
    assert all(e == envs[0] for e in envs)
    e = envs[0]
    assert e["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
    assert e["MIRRORBOOK_AUDIT_URL"].startswith("postgresql") and "@postgres:5432/" in e["MIRRORBOOK_AUDIT_URL"]
    assert e["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
    # The DAGs and the Spark apps come with the installed wheel: nothing of the repository's code is mounted.
    mounted = {str(m) for m in bind_mounts(services["airflow-scheduler"]).values()}
    assert mounted == {str(REPO / "include" / "mirrorbook" / "topology.yaml")}, mounted
    assert published(services["airflow-api-server"]) == {8080: 8080}
    audit_db = e["MIRRORBOOK_AUDIT_URL"].rsplit("/", 1)[1]
    assert f"CREATE DATABASE {audit_db}" in (REPO / "docker" / "postgres" / "init-mirrorbook.sql").read_text()


def test_published_host_ports_are_unique(services):
    seen: dict[int, str] = {}
    assert services
    for name, service in services.items():
        for host in published(service).values():
            assert host not in seen, f"host port {host} published by {seen.get(host)} and {name}"
            seen[host] = name


# -- the secured variant (docker-compose.secure.yml), as `devstack up --secure` ------------------------------

SECURE = REPO / "docker-compose.secure.yml"
SECRETS_DIR = "/etc/mirrorbook/security"


@pytest.fixture(scope="module")
def secure_compose() -> dict[str, Any]:
    return yaml.safe_load(SECURE.read_text())


@pytest.fixture(scope="module")
def secure_init() -> ModuleType:
    return docker_script("secure_init")


@pytest.fixture(scope="module")
def secured_files(secure_init: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, str]]:
    from mirrorbook.devstack.security import Material

    material = Material(tmp_path_factory.mktemp("secure-compose")).ensure(secure_init.HOSTS)
    return material, secure_init.files(material)


def test_the_secured_override_only_changes_services_the_base_has_or_its_own(services, secure_compose):
    own = {"secure-init", "secure-acls"}
    assert set(secure_compose["services"]) - own <= set(services)
    assert secure_compose["volumes"] == {"mirrorbook-secrets": None}


def test_every_secrets_file_the_override_names_is_rendered(secure_compose, secured_files):
    material, files = secured_files
    made = set(files) | {p.relative_to(material.dir).as_posix() for p in material.dir.rglob("*")}
    named = set(re.findall(rf"{SECRETS_DIR}/([\w.-]+(?:/[\w.-]+)*)", SECURE.read_text()))
    assert named and named <= made | {"connectors/A-B", "connectors/B-A"}, named - made


def test_secured_brokers_are_the_devstacks_secured_brokers(services, secured_files, secure_compose):
    material, files = secured_files
    for alias, service in KAFKA_SERVICES.items():
        props = properties(files[f"broker-{alias}.properties"])
        # The devstack's broker settings, and its secured ones (mirrorbook.devstack.security) for two SASL_SSL
        # listeners: the compose network's and the host's, on the ports the base file publishes.
        base = config.broker_properties(19092, 9093, Path("/var/lib/kafka/data"))
        secured = material.broker_security(("SASL_SSL", "SASL_SSL_HOST"))
        for k, v in base.items():
            if k not in BROKER_KEYS_PER_DEPLOYMENT and k not in secured:
                assert props[k] == config.render_properties({k: v}).strip().split("=", 1)[1], k
        for k, v in secured.items():
            assert props[k] == config.render_properties({k: v}).strip().split("=", 1)[1], k
        host_port = next(p for p in published(services[service]) if p != 19092)
        assert f"SASL_SSL_HOST://localhost:{host_port}" in props["advertised.listeners"]
        assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,SASL_SSL_HOST:SASL_SSL,CONTROLLER:SSL"
        cmd = " ".join(command(secure_compose["services"][service]))
        assert f"-c {SECRETS_DIR}/broker-{alias}.properties" in cmd and f"@{SECRETS_DIR}/scram.args" in cmd
        assert f"kafka-server-start.sh {SECRETS_DIR}/broker-{alias}.properties" in cmd
    assert files["scram.args"].count("--add-scram") == 4  # admin, mm2, mirrorbook, app


def test_secured_workers_and_connectors_are_the_devstacks(secured_files, secure_compose, topology):
    material, files = secured_files
    assert topology.flows
    for alias, service in CONNECT_SERVICES.items():
        props = properties(files[f"worker-{alias}.properties"])
        for k, v in material.worker_properties(8083, host="0.0.0.0").items():
            assert props[k] == config.render_properties({k: v}).strip().split("=", 1)[1], k
        assert props["listeners"] == "https://0.0.0.0:8083" and props["rest.advertised.host.name"] == service
        spec = secure_compose["services"][service]
        assert command(spec)[-1] == f"{SECRETS_DIR}/worker-{alias}.properties"
        assert env(spec)["KAFKA_OPTS"] == f"-Djava.security.auth.login.config={SECRETS_DIR}/connect-jaas.conf"
        init = command(secure_compose["services"][f"{service}-init"])
        assert init[init.index("--url") + 1] == f"https://{service}:8083" and "--credentials" in init
    for flow in topology.flows:
        for name in flow.connectors.model_dump().values():
            body = json.loads(files[f"connectors/{flow.source}-{flow.target}/{name.rsplit('.', 1)[1]}.json"])
            assert body["name"] == name
            for k, v in material.connector_properties().items():
                assert body["config"][k] == v, k
            assert body["config"]["source.cluster.sasl.jaas.config"].startswith("${file:")


def test_secured_airflow_reads_its_connections_from_the_secrets_volume(secured_files, secure_compose, topology):
    material, files = secured_files
    conns = json.loads(files["airflow-connections.json"])
    assert set(conns) == {c.connection_id for c in [*topology.clusters.values(), *topology.connect_clusters.values()]}
    for spec in topology.clusters.values():
        extra = conns[spec.connection_id]["extra"]
        assert extra["security.protocol"] == "SASL_SSL" and extra["sasl.username"] == "mirrorbook"
        assert extra["bootstrap.servers"] == spec.bootstrap_servers
    for spec in topology.connect_clusters.values():
        c = conns[spec.connection_id]
        assert c["schema"] == "https" and c["extra"]["use_tls"] is True and c["login"] == "mirrorbook"
    for name in ("airflow-init", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor",
                 "airflow-triggerer"):
        e = env(secure_compose["services"][name])
        assert e["AIRFLOW__SECRETS__BACKEND"] == "airflow.secrets.local_filesystem.LocalFilesystemBackend"
        assert json.loads(e["AIRFLOW__SECRETS__BACKEND_KWARGS"]) == {
            "connections_file_path": f"{SECRETS_DIR}/airflow-connections.json"}
    # No secret is written into the override: every password is made by secure-init, in the volume.
    text = SECURE.read_text()
    assert not [v for v in material.secrets().all_values() if v in text]
