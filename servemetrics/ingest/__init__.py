"""Ingest: exposition parsing, source adapters, scraping, remote_write and backfill."""
