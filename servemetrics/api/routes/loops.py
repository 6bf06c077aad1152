"""Placeholder router (filled in by the loops work)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
