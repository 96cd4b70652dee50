"""A fake OpenAI-compatible Chat Completions API on 127.0.0.1 for OpenCode (and any agent that takes a custom
base URL): the first main-loop request that offers the scripted tool gets one streamed tool call, every
later request plain text; every request body is recorded so tests can read what the model was told.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.e2e.fake_apis import FakeAPI


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def tool_messages(api: FakeAPI) -> list[str]:
    """The content of every ``role: tool`` message sent back to the model."""
    out: list[str] = []
    for req in api.requests:
        for msg in req.get("messages", []) or []:
            if isinstance(msg, dict) and msg.get("role") == "tool":
                content = msg.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def serve_openai(api: FakeAPI) -> FakeAPI:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, ctype: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            api.paths.append("GET " + self.path)
            self._send(200, "application/json", b'{"object": "list", "data": [{"id": "fake", "object": "model"}]}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.paths.append("POST " + self.path)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            api.requests.append(body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, "application/json", b'{"error": {"message": "not faked"}}')
                return
            offered = {t.get("function", {}).get("name") for t in body.get("tools", []) or []}
            answered = any(m.get("role") == "tool" for m in body.get("messages", []) or [] if isinstance(m, dict))
            call = None if answered else api.next_call(offered)
            if call is not None:
                chunks = [
                    _chunk(
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call.id,
                                    "type": "function",
                                    "function": {"name": call.name, "arguments": ""},
                                }
                            ],
                        }
                    ),
                    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(call.input)}}]}),
                    _chunk({}, "tool_calls"),
                ]
            else:
                chunks = [_chunk({"role": "assistant", "content": api.final_text}), _chunk({}, "stop")]
            usage = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            data = b"".join(chunks) + f"data: {json.dumps(usage)}\n\n".encode() + b"data: [DONE]\n\n"
            if body.get("stream"):
                self._send(200, "text/event-stream", data)
            else:
                msg: dict[str, Any] = {"role": "assistant", "content": api.final_text}
                reply = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "fake",
                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
                self._send(200, "application/json", json.dumps(reply).encode())

    api.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=api.server.serve_forever, daemon=True).start()
    return api
