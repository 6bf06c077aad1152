"""Placeholder router (filled in by the catalog work)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
