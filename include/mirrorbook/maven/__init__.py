"""Resolving JVM artifacts from Maven Central with `mvn` into a reusable, per-version cache.

Below both of its users: the devstack (the Kafka runtime of its brokers, Connect and MM2) and the proofs
(Spark's Kafka source, the record-parity job's `--jars`). The pinned coordinates are `versions`; the
Spark Kafka source's set is here (`spark_kafka_libs`) because both of them need it.

A throwaway POM lists the coordinates and `dependency:copy-dependencies` copies the transitive runtime
closure into the cache. A directory is only published (renamed into place) once complete.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping, Sequence
from xml.sax.saxutils import escape

from mirrorbook.errors import MirrorbookError
from mirrorbook.maven import versions
from mirrorbook.redaction import get_logger

log = get_logger(__name__)

MARKER = ".complete"
CENTRAL = "https://repo.maven.apache.org/maven2"
MAVEN_INSTALL = "sudo apt-get install -y maven"
# Signs in mvn's output that the repository could not be reached at all.
_NETWORK_SIGNS = re.compile(
    r"UnknownHost|Connection refused|Network is unreachable|Connect timed out|"
    r"No route to host|Could not transfer|transfer failed|connect to .* failed|Temporary failure in name resolution|"
    r"No plugin found for prefix",  # the dependency plugin itself could not be downloaded
    re.IGNORECASE,
)


class MavenError(MirrorbookError):
    """`mvn` could not resolve the artifacts asked for."""


class MavenMissing(MavenError):
    pass


class MavenUnreachable(MavenError):
    pass


def cache_dir() -> Path:
    """The per-user jar cache: MIRRORBOOK_CACHE, else mirrorbook/ under the XDG cache directory."""
    if os.environ.get("MIRRORBOOK_CACHE"):
        return Path(os.environ["MIRRORBOOK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mirrorbook"


def find_maven() -> str:
    found = shutil.which("mvn")
    if not found:
        raise MavenMissing("Maven (`mvn`) is required to fetch Kafka's jars from Maven Central, "
                           "but none is on PATH.", MAVEN_INSTALL)
    return found


def _ga(group: str, artifact: str) -> str:
    return f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"


def _pom(coords: list[str], exclusions: Mapping[str, Sequence[str]] | None = None) -> str:
    """`exclusions` maps a listed dependency's group:artifact to the group:artifacts to drop from its closure."""
    deps = []
    for c in coords:
        group, artifact, version = c.split(":")
        excluded = "".join(f"<exclusion>{_ga(*e.split(':'))}</exclusion>"
                           for e in (exclusions or {}).get(f"{group}:{artifact}", ()))
        deps.append(
            f"    <dependency>{_ga(group, artifact)}<version>{escape(version)}</version>"
            + (f"<exclusions>{excluded}</exclusions>" if excluded else "") + "</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>mirrorbook</groupId><artifactId>runtime</artifactId><version>1</version>"
        "<packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
    )


def _settings(repo_url: str) -> str:
    """A settings.xml that sends every request to one repository (MIRRORBOOK_MAVEN_REPO)."""
    return (
        "<settings><mirrors><mirror><id>mirrorbook</id><mirrorOf>*</mirrorOf>"
        f"<url>{escape(repo_url)}</url></mirror></mirrors></settings>\n"
    )


def resolve(coords: list[str], name: str, *, root: Path | None = None,
            exclusions: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Return a directory holding the jars for `coords` (and their runtime closure), fetching once.

    `exclusions` (group:artifact → [group:artifact]) prunes a dependency's closure, for POMs that
    name artifacts which are unpublished or already provided by the runtime.
    """
    dest = (root or cache_dir()) / name / "libs"
    wanted = "\n".join(sorted(coords) + [f"{k} -{e}" for k, v in sorted((exclusions or {}).items()) for e in v])
    marker = dest / MARKER
    if marker.is_file() and marker.read_text() == wanted:
        return dest

    mvn = find_maven()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mvn-", dir=dest.parent) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_pom(coords, exclusions))
        out_dir = work / "libs"
        cmd = [mvn, "-B", "-q", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={out_dir}", "-DincludeScope=runtime"]
        # Some POMs (Spark's) declare extra repositories that are unreachable from closed networks;
        # a mirror of `*` sends every request to one repository. As *global* settings, a user's own
        # ~/.m2/settings.xml (corporate mirror, proxy) still takes precedence.
        repo = os.environ.get("MIRRORBOOK_MAVEN_REPO")
        (work / "settings.xml").write_text(_settings(repo or CENTRAL))
        cmd += ["-gs", str(work / "settings.xml")]
        if os.environ.get("MIRRORBOOK_MAVEN_LOCAL_REPO"):
            cmd.append(f"-Dmaven.repo.local={os.environ['MIRRORBOOK_MAVEN_LOCAL_REPO']}")
        log.info("fetching %s from Maven Central (once; cached in %s)", name, dest)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr)[-4000:]
            where = repo or f"Maven Central ({CENTRAL})"
            if _NETWORK_SIGNS.search(output):
                raise MavenUnreachable(
                    f"Could not download {name} from {where}: the repository is unreachable.\n{_tail(output)}",
                    "check network access to the repository (proxy settings go in ~/.m2/settings.xml), "
                    "or point MIRRORBOOK_MAVEN_REPO at a reachable mirror",
                )
            raise MavenError(f"`mvn` failed to resolve {name} ({', '.join(coords)}):\n{_tail(output)}")
        (out_dir / MARKER).write_text(wanted)
        if dest.exists():
            shutil.rmtree(dest)
        out_dir.rename(dest)
    return dest


def _tail(output: str, lines: int = 8) -> str:
    kept = [ln for ln in output.splitlines() if ln.strip()]
    return "\n".join("    " + ln for ln in kept[-lines:])


def spark_kafka_libs(root: Path | None = None) -> Path:
    """Spark's Kafka source for Spark 4.x, resolved around the gaps in Maven Central (see versions.py)."""
    return resolve(versions.spark_kafka_coordinates(), f"spark-sql-kafka-{versions.SPARK_KAFKA_VERSION}", root=root,
                   exclusions=versions.spark_kafka_exclusions())
