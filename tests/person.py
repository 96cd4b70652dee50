"""A person at a UI, in a thread: answers every prompt (of one tool, if given) and keeps what it saw. For
tests that run blocking agent-side code (a hook's request, an agent's command) while someone answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from nexusd import protocol as p
from nexusd.client import Client

# what a person answers an item: (decision, scope), or None to leave it unanswered
Answer = Callable[[p.PendingItem], tuple[str, str] | None]


class Person:
    def __init__(
        self,
        socket: Path,
        answer: Literal["allow", "deny"] | Answer,
        name: str = "person",
        *,
        tool: str | None = None,
        timeout: float = 10,
    ) -> None:
        """``answer``: a decision given once to every prompt, or a function of the item; ``tool``: only
        that tool's prompts are seen and answered."""
        self.client = Client(socket_path=str(socket), role="ui", name=name, timeout=timeout).connect()
        self.client.subscribe()
        self.answer: Answer = (lambda _item: (answer, "once")) if isinstance(answer, str) else answer
        self.tool = tool
        self.seen: list[p.PendingItem] = []
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop:
            try:
                msg = self.client.next_event(timeout=0.2)
            except Exception:  # a timeout between prompts (or a closed connection: do not spin)
                time.sleep(0.05)
                continue
            if isinstance(msg, p.Prompt) and (self.tool is None or msg.item.call.tool == self.tool):
                self.seen.append(msg.item)
                choice = self.answer(msg.item)
                if choice is not None:
                    self.client.answer(msg.item.id, choice[0], choice[1])  # type: ignore[arg-type]

    def asked(self, request_id: str | None) -> bool:
        """Whether this person was asked about the request ``request_id`` (a Decision's ``id``)."""
        return request_id is not None and any(item.id == request_id for item in self.seen)

    def close(self) -> None:
        self.stop = True
        self.thread.join(2)
        self.client.close()
