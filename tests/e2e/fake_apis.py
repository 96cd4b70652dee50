"""Fake model APIs on 127.0.0.1 that script one tool call, then a final text answer.

Claude Code speaks Anthropic's Messages API (``POST /v1/messages``, SSE streaming); Gemini CLI speaks
``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``; Codex CLI speaks OpenAI's Responses API
(``POST /v1/responses``, SSE streaming) against a custom ``model_providers`` entry. Each server answers the
main loop's first request with one tool call and every later request (which carries the tool's result) with plain text,
and record every request body so tests can check what the model was told (e.g. a deny reason).
Side requests (titles, quota probes, token counting) get a short text answer.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any]
    id: str = "toolu_e2e_01"
    # only for a request whose first message holds this text (a subagent's task, not the main loop's)
    first_message_has: str | None = None


@dataclass
class FakeAPI:
    """A running fake server: ``url``, the scripted ``tool``, and every ``requests`` body it saw."""

    tool: ToolCall | list[ToolCall]
    final_text: str = "done"
    requests: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    tool_calls_sent: int = 0

    @property
    def script(self) -> list[ToolCall]:
        return self.tool if isinstance(self.tool, list) else [self.tool]

    def next_call(self, offered: set[Any], first_message: str = "") -> ToolCall | None:
        """The next scripted call for a main-loop request that offers its tool, in order; None when done."""
        if self.tool_calls_sent < len(self.script) and self.script[self.tool_calls_sent].name in offered:
            call = self.script[self.tool_calls_sent]
            if call.first_message_has is not None and call.first_message_has not in first_message:
                return None
            self.tool_calls_sent += 1
            return call
        return None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    # ------------------------------------------------------------------ what the model was told

    def tool_results(self) -> list[str]:
        """Claude: the text of every tool_result block sent back to the model."""
        out: list[str] = []
        for req in self.requests:
            for msg in req.get("messages", []):
                content = msg.get("content")
                if not isinstance(content, list):
                    continue
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        inner = block.get("content")
                        if isinstance(inner, list):
                            out.append(" ".join(str(b.get("text", "")) for b in inner if isinstance(b, dict)))
                        else:
                            out.append(str(inner))
        return out

    def codex_outputs(self) -> list[str]:
        """Codex: the output of every function_call_output sent back to the model."""
        out: list[str] = []
        for req in self.requests:
            for item in req.get("input", []) or []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    value = item.get("output")
                    out.append(value if isinstance(value, str) else json.dumps(value))
        return out

    def function_responses(self) -> list[str]:
        """Gemini: every functionResponse sent back to the model, as JSON text."""
        out: list[str] = []
        for req in self.requests:
            for content in req.get("contents", []):
                for part in content.get("parts", []):
                    if "functionResponse" in part:
                        out.append(json.dumps(part["functionResponse"]))
        return out


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def claude_stream(api: FakeAPI, body: dict[str, Any]) -> bytes:
    """One Messages API SSE stream: a tool_use for the first main-loop turn, text otherwise."""
    messages = body.get("messages") or [{}]
    first = json.dumps(messages[0].get("content", "")) if isinstance(messages[0], dict) else ""
    call = api.next_call({t.get("name") for t in body.get("tools", []) or []}, first)
    model = body.get("model", "claude-fake")
    chunks = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
    ]
    if call is not None:
        chunks += [
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
                },
            ),
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call.input)},
                },
            ),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "tool_use"
    else:
        chunks += [
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": api.final_text}},
            ),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        stop = "end_turn"
    chunks += [
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(chunks)


def gemini_stream(api: FakeAPI, body: dict[str, Any]) -> bytes:
    """One streamGenerateContent SSE response: a functionCall first, text once a functionResponse came back."""
    declared = {fd.get("name") for t in body.get("tools", []) or [] for fd in t.get("functionDeclarations", []) or []}
    call = api.next_call(declared)
    if call is not None:
        parts: list[dict[str, Any]] = [{"functionCall": {"name": call.name, "args": call.input}}]
    else:
        parts = [{"text": api.final_text}]
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-fake",
    }
    return f"data: {json.dumps(chunk)}\r\n\r\n".encode()


def codex_stream(api: FakeAPI, body: dict[str, Any]) -> bytes:
    """One Responses API SSE stream: a function_call for the next scripted call, a message otherwise."""
    offered = {t.get("name") for t in body.get("tools", []) or [] if isinstance(t, dict)}
    call = api.next_call(offered)
    n = api.tool_calls_sent
    if call is not None:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": call.id,
            "name": call.name,
            "arguments": json.dumps(call.input),
        }
    else:
        text = {"type": "output_text", "text": api.final_text, "annotations": []}
        item = {"type": "message", "role": "assistant", "id": "msg_fake", "status": "completed", "content": [text]}
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    return b"".join(
        _sse(kind, {"type": kind, **data})
        for kind, data in (
            ("response.created", {"response": {"id": f"resp_{n}"}}),
            ("response.output_item.done", {"item": item}),
            ("response.completed", {"response": {"id": f"resp_{n}", "usage": usage}}),
        )
    )


def _openai_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
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


def openai_stream(api: FakeAPI, body: dict[str, Any]) -> bytes:
    """Chat Completions, streamed: one tool call to the first request that offers the scripted tool and has no
    tool result yet, plain text otherwise, then a usage chunk."""
    offered = {t.get("function", {}).get("name") for t in body.get("tools", []) or []}
    answered = any(m.get("role") == "tool" for m in body.get("messages", []) or [] if isinstance(m, dict))
    call = None if answered else api.next_call(offered)
    if call is not None:
        chunks = [
            _openai_chunk(
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
            _openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(call.input)}}]}),
            _openai_chunk({}, "tool_calls"),
        ]
    else:
        chunks = [_openai_chunk({"role": "assistant", "content": api.final_text}), _openai_chunk({}, "stop")]
    usage = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return b"".join(chunks) + f"data: {json.dumps(usage)}\n\n".encode() + b"data: [DONE]\n\n"


def openai_reply(api: FakeAPI) -> bytes:
    """Chat Completions, not streamed (side calls such as titles): the final text."""
    msg: dict[str, Any] = {"role": "assistant", "content": api.final_text}
    reply = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return json.dumps(reply).encode()


def serve(api: FakeAPI, kind: str) -> FakeAPI:
    """Start ``api`` as a ``claude``, ``gemini``, ``codex`` or ``openai`` (Chat Completions: OpenCode, Copilot
    CLI's BYOK) fake on an ephemeral 127.0.0.1 port."""

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
            models = b'{"object": "list", "data": [{"id": "fake", "object": "model"}]}'
            self._send(200, "application/json", models if kind == "openai" else b"{}")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            api.paths.append("POST " + self.path)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            api.requests.append(body)
            if kind == "claude" and self.path.startswith("/v1/messages/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
            elif kind == "claude" and self.path.startswith("/v1/messages"):
                if body.get("stream"):
                    self._send(200, "text/event-stream", claude_stream(api, body))
                else:
                    msg = {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", "x"),
                        "content": [{"type": "text", "text": api.final_text}],
                        "stop_reason": "end_turn",
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    }
                    self._send(200, "application/json", json.dumps(msg).encode())
            elif kind == "gemini" and ":streamGenerateContent" in self.path:
                self._send(200, "text/event-stream", gemini_stream(api, body))
            elif kind == "gemini" and ":generateContent" in self.path:
                # Side calls (e.g. routing, next-speaker checks): a plain JSON answer.
                # The model router asks for a JSON complexity verdict; anything else gets the same harmless JSON.
                verdict = json.dumps({"complexity_reasoning": "scripted", "complexity_score": 10})
                reply = {"candidates": [{"content": {"role": "model", "parts": [{"text": verdict}]}, "index": 0}]}
                self._send(200, "application/json", json.dumps(reply).encode())
            elif kind == "codex" and self.path.startswith("/v1/responses"):
                self._send(200, "text/event-stream", codex_stream(api, body))
            elif kind == "gemini" and ":countTokens" in self.path:
                self._send(200, "application/json", b'{"totalTokens": 10}')
            elif kind == "openai" and self.path.rstrip("/").endswith("/chat/completions"):
                if body.get("stream"):
                    self._send(200, "text/event-stream", openai_stream(api, body))
                else:
                    self._send(200, "application/json", openai_reply(api))
            else:
                self._send(404, "application/json", b'{"error": {"message": "not faked"}}')

    api.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=api.server.serve_forever, daemon=True).start()
    return api
