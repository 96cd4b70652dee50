"""The floor: a bare anyio JSON-lines echo server on a Unix socket.

Each line is parsed as JSON and written back, so the floor pays what any JSON-lines server must (framing,
one decode, one encode, one send) and nothing a permission daemon adds. Run it as a separate process
(``python -m nexusd.bench.echo SOCKET``) so it gets a core of its own, like the daemon does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path

import anyio
import msgspec
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

MAX_LINE = 1 << 20
_encoder = msgspec.json.Encoder()
_decode = msgspec.json.decode


async def _handle(stream: SocketStream) -> None:
    buffered = BufferedByteReceiveStream(stream)
    async with stream:
        while True:
            try:
                line = await buffered.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError):
                return
            try:
                reply = _encoder.encode(_decode(line)) + b"\n"
            except msgspec.DecodeError:
                reply = b'{"type":"error","code":"bad_json","message":"bad json"}\n'
            try:
                await stream.send(reply)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


async def serve(path: Path) -> None:
    """Listen on ``path`` (0600) until cancelled or signalled."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = os.umask(0o077)
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    finally:
        os.umask(old)
    async with anyio.create_task_group() as tg:

        async def _signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(_signals)
        try:
            await listener.serve(_handle)
        finally:
            with anyio.CancelScope(shield=True):
                await listener.aclose()
            path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("socket", type=Path)
    ap.add_argument("--uvloop", action="store_true", help="run on uvloop instead of the default asyncio loop")
    args = ap.parse_args(argv)
    options = {"use_uvloop": True} if args.uvloop else {}
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, args.socket, backend="asyncio", backend_options=options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
