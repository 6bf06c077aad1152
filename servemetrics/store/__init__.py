"""Sample stores behind one narrow interface (``base.Store``)."""

from servemetrics.store.base import Cell, Reducer, Selection, SelectResult, Store, StoreStats, ValueSet

__all__ = ["Cell", "Reducer", "SelectResult", "Selection", "Store", "StoreStats", "ValueSet"]
