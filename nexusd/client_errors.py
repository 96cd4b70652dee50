"""How talking to nexusd can fail, and how each failure is said. Standard library only: the lean hook wire
raises these too.

None of them may ever be read as an allow: every caller turns them into a deny, with the reason
``describe`` gives (by the error's type, so each client says the same thing for the same failure).
"""


class NexusClientError(Exception):
    """Base of every client failure."""

    def describe(self, program: str, within: float | None = None) -> str:
        """A reason fit for the model and the user: what failed, never a traceback or a secret."""
        return f"{program} could not talk to nexusd"


class DaemonUnreachable(NexusClientError):
    """Cannot connect, the connection was lost, or the daemon said Bye."""

    def describe(self, program: str, within: float | None = None) -> str:
        return "the nexusd daemon is not reachable (is nexusd running?)"


class ReplyTimeout(DaemonUnreachable):
    """No (final) reply within the timeout."""

    def describe(self, program: str, within: float | None = None) -> str:
        return no_decision_in_time(within)


class BadReply(NexusClientError):
    """The daemon sent something undecodable, or not exactly the reply the protocol allows here."""

    def describe(self, program: str, within: float | None = None) -> str:
        return f"nexusd sent a reply {program} could not understand"


class ClientError(NexusClientError):
    """The daemon answered with a protocol Error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def describe(self, program: str, within: float | None = None) -> str:
        return f"nexusd refused the request: {self.message}"


def no_decision_in_time(within: float | None = None) -> str:
    return "no decision from nexusd in time" if within is None else f"no decision from nexusd within {within:g} s"


def describe(exc: BaseException, program: str, within: float | None = None) -> str:
    """The reason a client gives when ``exc`` ended its call: ``program`` names the client, ``within`` the
    time it waited for a decision (if it knows)."""
    if isinstance(exc, NexusClientError):
        return exc.describe(program, within)
    if isinstance(exc, TimeoutError):
        return no_decision_in_time(within)
    return f"{program} failed ({type(exc).__name__})"
