"""Runbook steps, framework-free: each reads state, decides, acts only if needed, waits, and audits."""
