"""HATEOAS links: the library writes them relative to the flows API root (`/A/B`, as KIP-1144 shows);
here they get the prefix the app is mounted under, so a client can follow them as given."""

from __future__ import annotations

from typing import Any

from mirrorbook.topology import FlowSpec


def prefixed(links: dict[str, str], base: str) -> dict[str, str]:
    return {rel: f"{base}{href}" for rel, href in links.items()}


def rebased(body: dict[str, Any], base: str) -> dict[str, Any]:
    """`body` with its `links` prefixed by `base`."""
    return {**body, "links": prefixed(body.get("links", {}), base)}


def flow_path(flow: FlowSpec) -> str:
    return f"/{flow.source}/{flow.target}"


def offsets_links(flow: FlowSpec, base: str) -> dict[str, str]:
    path = f"{base}{flow_path(flow)}"
    return {"herder [GET]": path, "offsets [GET]": f"{path}/offsets",
            "offsets modification [PATCH]": f"{path}/offsets", "offsets reset [DELETE]": f"{path}/offsets"}
