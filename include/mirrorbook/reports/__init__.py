"""Human-readable reports of runbook runs (HTML with inline SVG charts, plus their JSON data)."""
