"""What accepted mutations changed, in the words an on-call reads — one wording for the failing task's own error
(`core/engine.py`: the changes its runbook made before the failure) and for where a run stands
(`runbooks/standing.py`: the changes of the whole run, read back from the audit trail).

Only what the audit trail keeps of a call is used — its action and path (connector names, cluster aliases, group
ids) — so nothing said here can hold a secret; groups are counted, not listed, so a thousand written groups make one
line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable
from urllib.parse import unquote

from mirrorbook.bounds import cut, listed, shown

OFFSETS_DONE = {"alter": "altered", "reset": "reset", "restore": "restored"}
GROUP_WRITE = "groups.alter_offsets"

RoleOf = Callable[[str], "str | None"]  # a connector's name -> "A->B source", or None when it is no flow's


def connector_of(path: str) -> tuple[str, str]:
    """(real name, verb) of a `/connectors/<encoded name>/<verb>` path."""
    parts = path.split("/")
    return (unquote(parts[2]) if len(parts) > 2 else path), (parts[3] if len(parts) > 3 else "")


def group_of(path: str) -> tuple[str, str] | None:
    """(cluster, group) of a group write's `kafka://<cluster>/groups/<group>` path."""
    if not path.startswith("kafka://"):
        return None
    cluster, _, group = path.removeprefix("kafka://").partition("/groups/")
    return cluster, group


def change(action: str, method: str | None, path: str, role_of: RoleOf) -> str:
    """One accepted call in words: `A->B source: pause accepted by Connect`, `A->B source: offsets altered`."""
    if action.startswith("connector."):
        name, verb = connector_of(path)
        return f"{role_of(name) or f'connector {shown(name)}'}: {verb or action} accepted by Connect"
    if action.startswith("offsets."):
        name, _ = connector_of(path)
        done = action.split(".", 1)[1]
        return f"{role_of(name) or f'connector {shown(name)}'}: offsets {OFFSETS_DONE.get(done, done)}"
    return f"{action}: {method + ' ' if method else ''}{cut(path)}"


class Changes:
    """Accepted calls, each said once, in the order they were made; group writes counted per cluster (a retried
    task may write a group twice: it counts once)."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.groups: set[tuple[str, str]] = set()

    def add(self, action: str, method: str | None, path: str, role_of: RoleOf) -> None:
        if action == GROUP_WRITE and (found := group_of(path)) is not None:
            self.groups.add(found)
        elif (text := change(action, method, path, role_of)) not in self.said:
            self.said.append(text)

    def written(self) -> dict[str, int]:
        """Groups whose offsets were written, per cluster."""
        return dict(sorted(Counter(cluster for cluster, _ in self.groups).items()))

    def lines(self) -> list[str]:
        """Every change: the groups written first (per cluster), then the rest in order."""
        return [f"offsets of {n} group(s) written on {cut(cluster)}" for cluster, n in self.written().items()] + \
            self.said

    def __bool__(self) -> bool:
        return bool(self.said or self.groups)

    def __str__(self) -> str:
        return listed(self.lines())


def roles_noted(events: Iterable[Any]) -> dict[str, str]:
    """`A->B source` for each connector a step noted it acted on (`step.note(connector=…, role=…)`), as its step
    event or its calls' events keep it."""
    out = {}
    for e in events:
        connector, role = e.details.get("connector"), e.details.get("role")
        if e.kind in ("step", "call") and e.flow and isinstance(connector, str) and isinstance(role, str):
            out[connector] = f"{e.flow} {role}"
    return out


def accepted(events: Iterable[Any], role_of: RoleOf) -> Changes:
    """The changes of the accepted mutating calls among audit `events`."""
    out = Changes()
    for e in events:
        if e.kind == "call" and e.mutating and e.result == "ok":
            out.add(e.action, e.request.method if e.request else None, e.request.path if e.request else "", role_of)
    return out
