"""Placeholder router (filled in by the organization work)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
