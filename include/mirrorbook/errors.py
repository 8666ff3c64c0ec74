"""The error base every mirrorbook failure derives from: a message plus the fix, when there is one."""

from __future__ import annotations


class MirrorbookError(Exception):
    """An error an operator can act on. `hint` names the fix (a command, a setting). `changed`: what the task that
    failed with it had already changed (set by the runbook engine) — said right after the error, before the fix."""

    changed: str | None = None

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def told(self, head: str) -> str:
        """`head` (the error in one line), then what had already changed, then the fix."""
        changed = f"\n  {ALREADY_CHANGED}: {self.changed}" if self.changed else ""
        return f"{head}{changed}\n  fix: {self.hint}" if self.hint else f"{head}{changed}"

    def __str__(self) -> str:
        return self.told(self.message)


ALREADY_CHANGED = "before it failed, it had already changed"


class Refused(MirrorbookError):
    """The request was refused before anything changed: bad input, or a precondition that does not hold.

    Retrying cannot help; runbooks record these as "refused" and fail the task at once.
    """


class GateRefused(Refused):
    """A precondition of a mutating step does not hold; nothing was changed."""


class Verdict(MirrorbookError):
    """A check ran and found the state wrong (a failed proof, a read-back that differs from the plan).

    Final: running the same deterministic check again cannot change the answer, so it is never retried.
    """
