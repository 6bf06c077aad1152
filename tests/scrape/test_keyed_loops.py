"""``KeyedLoops``: a task per key, cancelled when its key is no longer wanted."""

from __future__ import annotations

import asyncio

from servemetrics.keyed_loops import KeyedLoops


def test_sync_starts_new_keys_cancels_gone_ones_and_stop_gathers():
    async def run() -> None:
        started: list[str] = []
        loops: KeyedLoops[str] = KeyedLoops()

        def loop(key: str):
            async def forever() -> None:
                started.append(key)
                await asyncio.Event().wait()

            return forever

        assert loops.sync({"a": loop("a"), "b": loop("b")}) == []
        await asyncio.sleep(0)
        assert loops.sync({"b": loop("b2"), "c": loop("c")}) == ["a"]  # b keeps its running task
        await asyncio.sleep(0)
        assert sorted(started) == ["a", "b", "c"] and len(loops) == 2 and "a" not in loops
        await loops.stop()
        assert len(loops) == 0

    asyncio.run(run())
