"""Devstack failures, each naming the fix."""

from __future__ import annotations

from mirrorbook.errors import MirrorbookError


class DevstackError(MirrorbookError):
    pass


class ToolMissing(DevstackError):
    pass


class PortInUse(DevstackError):
    pass


class ProcessDied(DevstackError):
    pass


class StackNotRunning(DevstackError):
    pass


class ReadinessTimeout(DevstackError):
    pass
