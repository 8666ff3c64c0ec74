"""Finding the JVM the stack needs, with the exact install command when it is missing (`mvn`: see
`mirrorbook.maven`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mirrorbook.devstack.errors import ToolMissing

JAVA_INSTALL = "sudo apt-get install -y openjdk-17-jre-headless   (or set JAVA_HOME to a JDK/JRE 17+)"


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if not found:
        raise ToolMissing("Java 17+ is required to run the Kafka brokers and Connect workers, "
                          "but no `java` was found (JAVA_HOME unset or invalid, none on PATH).",
                          JAVA_INSTALL)
    return found
