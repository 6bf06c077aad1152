"""``KeyedLoops[K]``: one asyncio task per key, kept in step with the keys wanted now.

The scraper runs a loop per target and the gateway's health checks a loop per replica; both are told
from time to time which keys exist and must stop the loops of keys gone and start loops for new keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
Loop = Callable[[], Coroutine[Any, Any, None]]
"""Makes the coroutine a key's task runs (called once, when the task starts)."""


class KeyedLoops(Generic[K]):
    """A task per key (call its methods inside the event loop)."""

    def __init__(self) -> None:
        self._tasks: dict[K, asyncio.Task[None]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, key: object) -> bool:
        return key in self._tasks

    def sync(self, wanted: Mapping[K, Loop]) -> list[K]:
        """Cancel the tasks of keys not in ``wanted`` (not waiting for them to end) and start
        ``wanted[key]()`` for each key without a task; keys already running keep their task.

        Returns:
            The keys whose tasks were cancelled.
        """
        gone = [key for key in self._tasks if key not in wanted]
        for key in gone:
            self._tasks.pop(key).cancel()
        loop = asyncio.get_running_loop()
        for key, start in wanted.items():
            if key not in self._tasks:
                self._tasks[key] = loop.create_task(start())
        return gone

    async def stop(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
