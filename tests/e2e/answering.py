"""A nexusd UI that answers every prompt while a real agent CLI runs: the person of the e2e tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from nexusd import protocol

T = TypeVar("T")


async def run_answering(
    run: Callable[[], T],
    socket: Path,
    answer: str,
    *,
    message: str | None = None,
    on_prompt: Callable[[protocol.PendingItem], Any] | None = None,
) -> tuple[T, list[protocol.PendingItem]]:
    """Run the blocking ``run`` in a thread while a UI, subscribed before it starts, answers each prompt with
    ``answer`` (``"timeout"``: it only watches, so the daemon's deadline decides). Returns ``run``'s result
    and the prompts seen."""
    from nexusd.client import AsyncClient

    prompts: list[protocol.PendingItem] = []
    async with AsyncClient(socket_path=str(socket), role="ui", name="e2e-ui") as ui:
        events = ui.subscribe().__aiter__()
        assert isinstance(await events.__anext__(), protocol.Snapshot)

        async def answer_prompts() -> None:
            async for event in events:
                if isinstance(event, protocol.Prompt):
                    prompts.append(event.item)
                    if on_prompt is not None:
                        on_prompt(event.item)
                    if answer != "timeout":
                        await ui.call(protocol.Answer(id=event.item.id, decision=answer, message=message))

        box: dict[str, T] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_prompts)
            box["result"] = await anyio.to_thread.run_sync(run)
            tg.cancel_scope.cancel()
    return box["result"], prompts
