"""A person at a UI, in a thread: answers every prompt with one decision and keeps what it saw. For tests
that run blocking agent-side code (a hook's request, an agent's command) while someone answers."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Literal

from nexusd import protocol as p
from nexusd.client import Client


class Person:
    def __init__(self, socket: Path, decision: Literal["allow", "deny"], name: str = "person") -> None:
        self.client = Client(socket_path=str(socket), role="ui", name=name, timeout=10).connect()
        self.client.subscribe()
        self.decision = decision
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
            if isinstance(msg, p.Prompt):
                self.seen.append(msg.item)
                self.client.answer(msg.item.id, self.decision, "once")

    def asked(self, request_id: str | None) -> bool:
        """Whether this person was asked about the request ``request_id`` (a Decision's ``id``)."""
        return request_id is not None and any(item.id == request_id for item in self.seen)

    def close(self) -> None:
        self.stop = True
        self.thread.join(2)
        self.client.close()
