"""Signals that arrive while the daemon starts, before its event loop handles them: recorded, then acted on.

The socket is bound first (clients may connect at once), then the heavy modules load and the loop starts.
Left to Python's defaults, a signal in that window does harm:
- SIGTERM and SIGHUP kill the process outright, leaving its socket file behind;
- SIGINT raises KeyboardInterrupt wherever the interpreter is: inside an import, or inside asyncio's
  start-up, whose own SIGINT handler then cancels the main task at whatever await it has reached;
- and a CPython quirk (3.11): a KeyboardInterrupt raised inside ``exec`` of generated code (dataclasses,
  namedtuple, at import) makes the interpreter exit "killed by SIGINT" even when the exception was caught.

So from the first line of ``main`` these three are only recorded here; the server's signal loop takes
over once its handlers are in place and acts on what was recorded (a stop, or a reload).
"""

from __future__ import annotations

import signal
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StartSignals:
    """What arrived before the event loop's handlers: the first stop signal, and whether a reload was asked."""

    def __init__(self) -> None:
        self.stop: signal.Signals | None = None
        self.reload = False

    def install(self) -> StartSignals:
        for sig in SIGNALS:
            signal.signal(sig, self._record)
        return self

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self.reload = True
        elif self.stop is None:
            self.stop = signal.Signals(signum)
