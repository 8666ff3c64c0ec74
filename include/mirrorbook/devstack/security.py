"""A secured devstack (`devstack up --secure`): SASL_SSL brokers with SCRAM users and ACLs, Connect's REST API on
HTTPS behind basic auth, MM2's clients on SASL_SSL — and every secret in 0600 files of the run dir, never on a
command line, in stack.json, the topology or `status`.

What is made (once per run dir, under `<run dir>/security/`, reused by every later `up`):
- `ca.pem`: a throwaway CA (PEM: librdkafka's `ssl.ca.location`, httpx's `verify`, the JVMs' PEM truststore);
- `server.p12`: the one server/client certificate of every listener (CN `mirrorbook-devstack`, SAN localhost —
  docker-compose's adds its service names — and 127.0.0.1), a PKCS12 keystore the brokers and Connect's Jetty read;
- `secrets.json` (0600): the SCRAM users' passwords, the keystore's and the Connect basic-auth user's;
- `connect-users.properties`, `connect-jaas.conf` (basic auth: Connect's `PropertyFileLoginModule`), and
  `mm2-client.properties` (the `mm2` principal's JAAS line, read by Connect's FileConfigProvider, so a connector's
  config — which Connect shows to anyone who may read it — holds only a `${file:…}` reference).

Listeners, as Kafka's security docs lay them out for KRaft: clients and inter-broker traffic on `SASL_SSL`
(SCRAM-SHA-512, the broker authenticating as the super user `admin`); the controller listener on `SSL` with
client certificates required (SCRAM cannot serve a controller listener: its credentials live in the metadata the
controller serves), the certificate's principal a super user. `StandardAuthorizer` with no ACL means no access.

Principals: `admin` (super user: the broker itself and the devstack's own bootstrapping), `mm2` (the Connect
workers and MirrorMaker 2's clients), `mirrorbook` (the runbooks: only what they need), `app` (the workload).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, SecretStr

from mirrorbook.connect import ConnectSettings

MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_SSL"
USERS = ("admin", "mm2", "mirrorbook", "app")
SUPER_USER = "admin"
CONNECT_USER = "mirrorbook"  # the basic-auth user of every Connect worker's REST API
CERT_CN = "mirrorbook-devstack"
CERT_PRINCIPAL = f"User:CN={CERT_CN}"  # the controller listener's (mTLS) principal: the broker itself
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
PROPERTY_FILE_LOGIN = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
JAAS_KEY = "sasl.jaas.config"


class Secrets(BaseModel):
    """What `secrets.json` holds. Only the devstack reads it; it is shown nowhere."""

    passwords: dict[str, SecretStr]  # SCRAM user -> password
    keystore_password: SecretStr
    connect_password: SecretStr  # CONNECT_USER's

    def password(self, user: str) -> str:
        return self.passwords[user].get_secret_value()

    def all_values(self) -> list[str]:
        """Every secret, for scans that prove none leaked."""
        return [*(p.get_secret_value() for p in self.passwords.values()), self.keystore_password.get_secret_value(),
                self.connect_password.get_secret_value()]


class Material:
    """The files of a secured stack's run dir (paths, never contents, in anything shown)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / "security"

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.dir / "server.p12"

    @property
    def secrets_path(self) -> Path:
        return self.dir / "secrets.json"

    @property
    def connect_users(self) -> Path:
        return self.dir / "connect-users.properties"

    @property
    def connect_jaas(self) -> Path:
        return self.dir / "connect-jaas.conf"

    @property
    def mm2_client(self) -> Path:
        return self.dir / "mm2-client.properties"

    def secrets(self) -> Secrets:
        return Secrets.model_validate_json(self.secrets_path.read_text())

    def ensure(self, hosts: Sequence[str] = ("localhost",)) -> Material:
        """Make the CA, the certificate (for `hosts`) and the secrets once; later calls reuse them (a running
        stack keeps its credentials across `up`s)."""
        if self.secrets_path.is_file() and self.keystore.is_file() and self.ca.is_file():
            return self
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        sec = Secrets(passwords={u: SecretStr(_password()) for u in USERS}, keystore_password=SecretStr(_password()),
                      connect_password=SecretStr(_password()))
        ca_pem, p12 = _certificates(sec.keystore_password.get_secret_value(), hosts)
        self.ca.write_bytes(ca_pem)
        write_private(self.keystore, p12)
        write_private(self.secrets_path, json.dumps({
            "passwords": {u: sec.password(u) for u in USERS},
            "keystore_password": sec.keystore_password.get_secret_value(),
            "connect_password": sec.connect_password.get_secret_value()}).encode())
        write_private(self.connect_users, f"{CONNECT_USER}: {sec.connect_password.get_secret_value()}\n".encode())
        self.connect_jaas.write_text(
            f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN} required\n  file="{self.connect_users}";\n}};\n')
        write_private(self.mm2_client, f"{JAAS_KEY}={_jaas_escaped(jaas('mm2', sec.password('mm2')))}\n".encode())
        return self

    # -- librdkafka (Python) --------------------------------------------------------------------------------
    def client_config(self, bootstrap: str, user: str) -> dict[str, Any]:
        """A librdkafka config for `user` (what a `kafka` Airflow connection's extra holds)."""
        return {"bootstrap.servers": bootstrap, "security.protocol": PROTOCOL, "sasl.mechanism": MECHANISM,
                "sasl.username": user, "sasl.password": self.secrets().password(user),
                "ssl.ca.location": str(self.ca)}

    # -- brokers --------------------------------------------------------------------------------------------
    def broker_properties(self, broker_port: int, controller_port: int | None) -> dict[str, object]:
        """What a secured devstack broker sets over the plaintext one's listeners (`controller_port`: a
        controller's, None on a broker-only node)."""
        listeners = f"SASL_SSL://localhost:{broker_port}" + (
            f",CONTROLLER://localhost:{controller_port}" if controller_port else "")
        return {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
            **self.broker_security(("SASL_SSL",)),
        }

    def broker_security(self, sasl_listeners: Sequence[str]) -> dict[str, object]:
        """A secured broker's settings but its listeners (`sasl_listeners`: the names of its SASL_SSL ones, the
        first the inter-broker one) — the devstack's and docker-compose's secured brokers alike."""
        sec = self.secrets()
        return {
            "inter.broker.listener.name": sasl_listeners[0],
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            **{f"listener.name.{name.lower()}.{MECHANISM.lower()}.{JAAS_KEY}": jaas(SUPER_USER, sec.password(SUPER_USER))
               for name in sasl_listeners},
            "listener.name.controller.ssl.client.auth": "required",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": self.keystore,
            "ssl.keystore.password": sec.keystore_password.get_secret_value(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{SUPER_USER};{CERT_PRINCIPAL}",
            "allow.everyone.if.no.acl.found": False,
        }

    def scram_format_args(self) -> list[str]:
        """`kafka-storage format` arguments creating every SCRAM user in the bootstrap metadata. They hold the
        passwords: they go to a 0600 argument file (`java @file`), never to the command line."""
        sec = self.secrets()
        out: list[str] = []
        for user in USERS:
            out += ["--add-scram", f"{MECHANISM}=[name={user},password={sec.password(user)}]"]
        return out

    # -- Connect --------------------------------------------------------------------------------------------
    def worker_properties(self, rest_port: int, host: str = "localhost") -> dict[str, object]:
        """A secured worker: REST on HTTPS only behind basic auth; its own clients as `mm2` on SASL_SSL; the file
        config provider for the connectors' `${file:…}` references."""
        sec = self.secrets()
        clients = self.java_client_properties("mm2")
        out: dict[str, object] = {
            "listeners": f"https://{host}:{rest_port}",
            "rest.advertised.listener": "https",
            "listeners.https.ssl.keystore.type": "PKCS12",
            "listeners.https.ssl.keystore.location": self.keystore,
            "listeners.https.ssl.keystore.password": sec.keystore_password.get_secret_value(),
            # No REST truststore: Jetty reads no PEM store, and one worker per cluster forwards no request to a
            # leader; clients authenticate with basic auth, not certificates.
            "listeners.https.ssl.client.auth": "none",
            "rest.extension.classes": BASIC_AUTH_EXTENSION,
            "config.providers": "file",
            "config.providers.file.class": FILE_PROVIDER,
            "config.providers.file.param.allowed.paths": self.dir,
            **clients,
        }
        for prefix in ("producer.", "consumer.", "admin."):
            out.update({prefix + k: v for k, v in clients.items()})
        return out

    def java_client_properties(self, user: str) -> dict[str, object]:
        return {"security.protocol": PROTOCOL, "sasl.mechanism": MECHANISM,
                JAAS_KEY: jaas(user, self.secrets().password(user)),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca}

    def connector_properties(self) -> dict[str, str]:
        """MM2's source and target clients as `mm2`; the JAAS line by reference, so GET …/config shows no secret."""
        ref = f"${{file:{self.mm2_client}:{JAAS_KEY}}}"
        out: dict[str, str] = {}
        for side in ("source.cluster.", "target.cluster."):
            out.update({side + "security.protocol": PROTOCOL, side + "sasl.mechanism": MECHANISM,
                        side + JAAS_KEY: ref, side + "ssl.truststore.type": "PEM",
                        side + "ssl.truststore.location": str(self.ca)})
        return out

    def worker_jvm_opts(self) -> list[str]:
        """The JAAS file naming the basic-auth user file (a path; the passwords stay in the 0600 file)."""
        return [f"-Djava.security.auth.login.config={self.connect_jaas}"]

    def connect_settings(self, url: str, name: str | None = None) -> ConnectSettings:
        return ConnectSettings(url=url, name=name, username=CONNECT_USER, password=self.secrets().connect_password,
                               verify=str(self.ca))

    def connect_connection(self, port: int, host: str = "localhost") -> dict[str, object]:
        """The `kafka_connect` Airflow connection of a secured worker."""
        return {"conn_type": "kafka_connect", "host": host, "port": port, "schema": "https",
                "login": CONNECT_USER, "password": self.secrets().connect_password.get_secret_value(),
                "extra": {"use_tls": True, "verify": str(self.ca)}}

    # -- ACLs -----------------------------------------------------------------------------------------------
    def ensure_acls(self, bootstrap: str, timeout_s: float = 30.0) -> int:
        """Create the principals' ACLs (as the super user); idempotent: Kafka keeps one copy of a binding."""
        from confluent_kafka.admin import AdminClient

        from mirrorbook.kafka.config import client_config

        admin = AdminClient(client_config(self.client_config(bootstrap, SUPER_USER)))
        bindings = acl_bindings()
        for fut in admin.create_acls(bindings, request_timeout=timeout_s).values():
            fut.result()
        return len(bindings)


# (principal, resource type (confluent-kafka names the cluster BROKER), name, pattern, operations) — the grants of every principal but the super user.
ACLS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    # MirrorMaker 2 and its Connect workers: they read every source topic, create and write the remote topics
    # and their own internal topics, and keep offsets for their groups and the workers' group.
    ("mm2", "TOPIC", "*", "LITERAL", ("ALL",)),
    ("mm2", "GROUP", "*", "LITERAL", ("ALL",)),
    ("mm2", "BROKER", "kafka-cluster", "LITERAL", ("DESCRIBE", "DESCRIBE_CONFIGS", "CREATE", "IDEMPOTENT_WRITE")),
    # The runbooks: read topics (MM2's internal ones and the mirrored), describe configs, describe and alter
    # (READ) and delete (the drill's own) groups; create and write only their own topics (the drill's canary,
    # the audit anchors), named mirrorbook*.
    ("mirrorbook", "TOPIC", "*", "LITERAL", ("DESCRIBE", "READ", "DESCRIBE_CONFIGS")),
    ("mirrorbook", "TOPIC", "mirrorbook", "PREFIXED", ("CREATE", "WRITE")),
    ("mirrorbook", "GROUP", "*", "LITERAL", ("DESCRIBE", "READ", "DELETE")),
    ("mirrorbook", "BROKER", "kafka-cluster", "LITERAL", ("DESCRIBE", "DESCRIBE_CONFIGS")),
    # The workload: creates and writes its topics, consumes and parks its groups.
    ("app", "TOPIC", "*", "LITERAL", ("DESCRIBE", "READ", "WRITE", "CREATE")),
    ("app", "GROUP", "*", "LITERAL", ("DESCRIBE", "READ")),
    # ... and writes in transactions (`load --transactions`: an exactly-once producer's markers and aborts).
    ("app", "TRANSACTIONAL_ID", "mirrorbook-workload", "PREFIXED", ("DESCRIBE", "WRITE")),
]


def acl_bindings() -> list[Any]:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return [AclBinding(ResourceType[rtype], name, ResourcePatternType[pattern], f"User:{user}", "*",
                       AclOperation[op], AclPermissionType.ALLOW)
            for user, rtype, name, pattern, ops in ACLS for op in ops]


def jaas(user: str, password: str) -> str:
    return f'{SCRAM_MODULE} required username="{user}" password="{password}";'


def _jaas_escaped(value: str) -> str:
    """A value in a Java properties file: backslashes and the separators a reader would take otherwise."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")


def _password() -> str:
    # URL-safe and free of the characters JAAS, properties files and SCRAM's format syntax treat specially.
    return secrets.token_hex(16)


def write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read — created so, never readable for a moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file of the same name may have been readable
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _certificates(keystore_password: str, hosts: Sequence[str] = ("localhost",)) -> tuple[bytes, bytes]:
    """A throwaway CA (PEM) and one certificate it signed for `hosts` and 127.0.0.1 (server and client use), as
    PKCS12."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=30)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirrorbook devstack CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CERT_CN)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([*(x509.DNSName(h) for h in hosts),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    p12 = pkcs12.serialize_key_and_certificates(
        b"mirrorbook-devstack", key, cert, [ca],
        serialization.BestAvailableEncryption(keystore_password.encode()))
    return ca.public_bytes(serialization.Encoding.PEM), p12
