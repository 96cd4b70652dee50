"""The TUI's connection to nexusd: subscribe, forward events, reconnect with backoff when it goes away.

A lost connection loses everything pending (the daemon denies it all on the way down, and a new daemon
has new ids), so the link keeps no answer to send later: ``call`` fails at once when not connected.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from nexus_clients.tui.escaping import escape_plain
from nexusd import protocol

DaemonCall = Callable[[protocol._Msg], Awaitable[Any]]
"""Send one message to nexusd and await its reply (``DaemonLink.call``): what the app hands to a screen that
queries or changes the daemon, so no screen needs the app itself."""


@dataclass(frozen=True)
class LinkUp:
    """Connected and subscribed (the daemon sent its Snapshot, which follows at once)."""

    version: str


@dataclass(frozen=True)
class LinkDown:
    """The daemon is unreachable or went away; the link retries after ``retry_in`` seconds."""

    reason: str
    retry_in: float


class NotConnected(Exception):
    """Raised by ``call`` while there is no live connection: nothing is queued for later."""


def describe_error(e: BaseException) -> str:
    """A failed ``call`` for a person, one line: the daemon's error code and message, escaped (the message
    can quote what an agent wrote)."""
    if isinstance(e, NotConnected):
        return "not connected to nexusd (nothing was sent)"
    code = getattr(e, "code", None)
    if code:
        return f"{code}: {escape_plain(str(getattr(e, 'message', '')), limit=200)}"
    return escape_plain(str(e) or type(e).__name__, limit=200)


class DaemonLink:
    def __init__(
        self,
        socket_path: Path | None,
        on_event: Callable[[Any], None],
        *,
        name: str = "nexus-tui",
        backoff_min: float = 0.1,
        backoff_max: float = 5.0,
        timeout: float = 5.0,
    ) -> None:
        self.socket_path = socket_path
        self.on_event = on_event
        self.name = name
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self.timeout = timeout
        self._client: Any = None

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def run(self) -> None:
        """Forever: connect, subscribe, forward; on loss report it, back off, try again."""
        from nexusd.client import AsyncClient, NexusClientError

        delay = self.backoff_min
        while True:
            reason = "connection closed"
            try:
                async with AsyncClient(
                    socket_path=self.socket_path, role="ui", name=self.name, timeout=self.timeout
                ) as client:
                    self._client = client
                    delay = self.backoff_min
                    up = False
                    async for event in client.subscribe():
                        if not up:  # "connected" means subscribed: prompts from here on reach us
                            up = True
                            self.on_event(LinkUp(client.welcome.version if client.welcome else "?"))
                        self.on_event(event)
                        if isinstance(event, protocol.Bye):
                            reason = f"nexusd stopped: {event.reason}"
            except NexusClientError as e:
                reason = str(e) or type(e).__name__
            except OSError as e:  # belt and braces: the client should wrap these
                reason = str(e)
            finally:
                self._client = None
            self.on_event(LinkDown(reason, delay))
            await anyio.sleep(delay)
            delay = min(self.backoff_max, delay * 2)

    async def call(self, msg: protocol._Msg) -> Any:
        """Send one message and return its reply; raises NotConnected, or the client's errors."""
        client = self._client
        if client is None:
            raise NotConnected("not connected to nexusd")
        return await client.call(msg)
