"""Renders the secured docker-compose deployment's files (docker-compose.secure.yml's one-shot `secure-init`).

What `mirrorbook devstack up --secure` makes, made by the same code (`mirrorbook.devstack.security` and
`mirrorbook.devstack.config`, with compose's addresses from include/mirrorbook/topology.yaml and docker/render_configs.py's
MM2 settings), into the secrets volume — never into the repository: a throwaway CA and one certificate for the
compose service names, the SCRAM users (`kafka-storage format … @scram.args`), the brokers' and workers'
properties, the MM2 connector bodies, a client config of the super user for kafka-init, the basic-auth
credentials for the connector registration, and the Airflow connections (read by Airflow's local-filesystem
secrets backend). Idempotent: a second run keeps the secrets and rewrites the rest.

    python docker/secure_init.py /etc/mirrorbook     # files under /etc/mirrorbook/security/
    python docker/secure_init.py --owner kafka=1000 --owner airflow=50000 /etc/mirrorbook
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # render_configs, beside this file

import render_configs  # noqa: E402

from mirrorbook.devstack import config, security  # noqa: E402
from mirrorbook.topology import load_topology  # noqa: E402

KAFKA = {"A": "kafka-a", "B": "kafka-b"}
CONNECT = {"B": "connect-b", "A": "connect-a"}
INTERNAL_PORT, HOST_PORTS, CONTROLLER_PORT, REST_PORT = 19092, {"A": 9092, "B": 9094}, 9093, 8083
HOSTS = ("localhost", *KAFKA.values(), *CONNECT.values())
DATA_DIR = Path("/var/lib/kafka/data")
# Which container user reads which file (the kafka image's and the Airflow image's): set by --owner.
READERS = {"airflow": ("airflow-connections.json",)}


def broker_properties(m: security.Material, alias: str) -> dict[str, object]:
    host = KAFKA[alias]
    props = config.broker_properties(INTERNAL_PORT, CONTROLLER_PORT, DATA_DIR)
    props.update({
        "listeners": f"SASL_SSL://:{INTERNAL_PORT},SASL_SSL_HOST://:{HOST_PORTS[alias]},CONTROLLER://:{CONTROLLER_PORT}",
        "advertised.listeners": f"SASL_SSL://{host}:{INTERNAL_PORT},SASL_SSL_HOST://localhost:{HOST_PORTS[alias]},"
                                f"CONTROLLER://{host}:{CONTROLLER_PORT}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SASL_SSL_HOST:SASL_SSL,CONTROLLER:SSL",
        "controller.quorum.bootstrap.servers": f"{host}:{CONTROLLER_PORT}",
        **m.broker_security(("SASL_SSL", "SASL_SSL_HOST")),
    })
    return props


def files(m: security.Material) -> dict[str, str]:
    """File name (in the secrets dir) -> content."""
    topology = load_topology(render_configs.TOPOLOGY)
    addresses = render_configs.bootstraps(topology)
    out = {f"broker-{a}.properties": config.render_properties(broker_properties(m, a)) for a in KAFKA}
    out["scram.args"] = "".join(f"{arg}\n" for arg in m.scram_format_args())
    out["admin-client.properties"] = config.render_properties(m.java_client_properties(security.SUPER_USER))
    for alias, spec in topology.connect_clusters.items():
        props = config.worker_properties(alias, addresses[alias], REST_PORT, render_configs.COMPOSE_STACK)
        props.update(m.worker_properties(REST_PORT, host="0.0.0.0"))
        props["rest.advertised.host.name"] = CONNECT[alias]
        out[f"worker-{alias}.properties"] = config.render_properties(props)
    for flow in topology.flows:
        for name, cfg in config.connector_configs(flow, addresses, render_configs.COMPOSE_MM2).items():
            body = {"name": name, "config": {**cfg, **m.connector_properties()}}
            role = name.rsplit(".", 1)[1]
            out[f"connectors/{render_configs.flow_dir_name(flow)}/{role}.json"] = json.dumps(body, indent=2) + "\n"
    out["connect-credentials"] = f"{security.CONNECT_USER}:{m.secrets().connect_password.get_secret_value()}\n"
    conns: dict[str, object] = {}
    for alias, spec in topology.clusters.items():
        conns[spec.connection_id] = {"conn_type": "kafka", "extra": m.client_config(addresses[alias], "mirrorbook")}
    for alias, spec in topology.connect_clusters.items():
        conns[spec.connection_id] = m.connect_connection(REST_PORT, host=CONNECT[alias])
    out["airflow-connections.json"] = json.dumps(conns, indent=2) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the files go to ROOT/security (the secrets volume)")
    parser.add_argument("--owner", action="append", default=[], metavar="READER=UID",
                        help="chown the files READER (kafka, airflow) reads to UID; the rest go to kafka")
    args = parser.parse_args(argv)
    m = security.Material(args.root).ensure(HOSTS)
    owners = dict(o.split("=", 1) for o in args.owner)
    for name, text in files(m).items():
        path = m.dir / name
        security.write_private(path, text.encode())
    if owners:  # every file 0600, owned by the one user whose container reads it
        for path in [m.dir, *m.dir.rglob("*")]:
            reader = next((r for r, names in READERS.items() if path.name in names), "kafka")
            uid = int(owners.get(reader, owners.get("kafka", os.getuid())))
            os.chown(path, uid, uid)
        # The CA is public and read by every container (Airflow, Spark, the registration): world-readable.
        os.chmod(m.ca, 0o644)
        os.chmod(m.dir, 0o755)
        for sub in (p for p in m.dir.rglob("*") if p.is_dir()):
            os.chmod(sub, 0o755)
    print(f"secured deployment files in {m.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
