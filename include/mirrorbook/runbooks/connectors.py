"""The pause/resume/stop runbook's vocabulary and what a re-run of it will do.

The steps themselves are the replication backend's (`set_state`; for MM2 on Connect,
replication/mm2_connect_states.py): this module only says, from the parts' states, which calls those steps
would make — the same decisions, not a second copy of them.
"""

from __future__ import annotations

from mirrorbook.connect.models import ConnectorStatus
from mirrorbook.connect.wait import reached
from mirrorbook.replication.backend import ACTION_TARGET, TARGET_ACTION, FlowTarget
from mirrorbook.replication.mm2_connect_states import decide, roles_for

__all__ = ["ACTION_TARGET", "TARGET_ACTION", "FlowTarget", "rerun_sentence"]


def rerun_sentence(statuses: dict[str, ConnectorStatus | None], selection: str, target: FlowTarget) -> str:
    """What `set_state(target, parts=selection)` would do from these statuses: the calls `decide` makes, per
    part, in the order it makes them; the parts it would leave as they are."""
    todo, left = [], []
    for role in roles_for(selection, target):
        status = statuses.get(role)
        if status is None:
            todo.append(f"read {role} and {TARGET_ACTION[target]} it unless it is {target} "
                        "(its state is unknown)")
            continue
        call = decide(status, target)
        if call is not None:
            todo.append(f"{call.what} {role}")
        elif reached(status, target):
            left.append(f"{role} ({target} already)")
        else:
            todo.append(f"wait for {role} to show {target} (it is {status.connector.state}, asked already)")
    if not todo:
        return f"change nothing ({', '.join(left)})"
    return "; then ".join(todo) + (f"; and leave {', '.join(left)}" if left else "")
