"""Placeholder router (filled in by the dashboard work)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
