"""DAG parameter forms generated from the runbooks' pydantic models.

The form a runbook shows (types, choices and their labels, bounds, titles, descriptions, defaults, in
the model's field order) is derived from the model that validates the run (runbooks/params.py), so
the UI and the validation cannot drift. The one thing a model cannot know is the topology: the `flow`
field offers its flows as proposals (`examples`) rather than a strict `enum` — an unknown flow then
reaches validate_params, which names the flows that do exist, instead of a generic schema error.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param
from pydantic import BaseModel

from mirrorbook.topology import Topology, default_path

# JSON-schema keywords Airflow's form understands and our models use.
_KEYWORDS = ("title", "description", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
             "minLength", "maxLength", "pattern", "values_display")


def _flatten(prop: dict[str, Any]) -> dict[str, Any]:
    """`X | None` comes as anyOf[{...X}, {"type": "null"}]: one property whose type is a list."""
    if "anyOf" not in prop:
        return dict(prop)
    out = {k: v for k, v in prop.items() if k != "anyOf"}
    types: list[str] = []
    for branch in prop["anyOf"]:
        t = branch.get("type")
        types += t if isinstance(t, list) else [t] if t else []
        out.update({k: v for k, v in branch.items() if k != "type"})
    out["type"] = types
    return out


def param_for(model: type[BaseModel], name: str, prop: dict[str, Any]) -> Param:
    field = model.model_fields[name]
    prop = _flatten(prop)
    kw = {k: prop[k] for k in _KEYWORDS if k in prop}
    if "type" in prop:
        kw["type"] = prop["type"]
    elif "enum" in kw:
        kw["type"] = "string"
    default = None if field.is_required() else field.get_default(call_default_factory=True)
    return Param(default, **kw)


def form(model: type[BaseModel], topology: Topology | None) -> dict[str, Param]:
    """The Params of `model`'s form, in field order; `flow` proposes the topology's flows."""
    props = model.model_json_schema()["properties"]
    params = {name: param_for(model, name, props[name]) for name in model.model_fields}
    if "flow" in params and model.model_fields["flow"].is_required():
        flows = topology.flow_names() if topology else []
        base = params["flow"].schema
        where = f" (flows in {default_path()}: {', '.join(flows) or 'none found'})"
        params["flow"] = Param(flows[0] if flows else "A->B", type="string", title=base.get("title"),
                               examples=flows or None, description=(base.get("description") or "") + where)
    if "approval" in params and topology is not None:
        # What `default` means for this runbook, as the topology said when the form was built (a run resolves
        # it against the topology it is validated with).
        mode = topology.approval.of(getattr(model, "approval_runbook"))
        schema = params["approval"].schema
        schema["values_display"] = {**schema.get("values_display", {}), "default": f"as the topology says ({mode})"}
    return params
