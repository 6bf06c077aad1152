"""Reliability under load: one tenant's large ingest does not stall the others (issue 12 parts 3, 10)."""
