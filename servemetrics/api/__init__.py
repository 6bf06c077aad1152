"""The REST API (FastAPI): metrics endpoints, management endpoints, ingest, /metrics export."""
