"""How talking to nexusd can fail. Standard library only: the lean hook wire raises these too.

None of them may ever be read as an allow: every caller turns them into a deny.
"""

from __future__ import annotations


class NexusClientError(Exception):
    """Base of every client failure."""


class DaemonUnreachable(NexusClientError):
    """Cannot connect, the connection was lost, or the daemon said Bye."""


class ReplyTimeout(DaemonUnreachable):
    """No (final) reply within the timeout."""


class BadReply(NexusClientError):
    """The daemon sent something undecodable, or not exactly the reply the protocol allows here."""


class ClientError(NexusClientError):
    """The daemon answered with a protocol Error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
