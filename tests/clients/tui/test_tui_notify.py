"""The optional desktop notification: off by default, and nothing an agent wrote is interpreted by it.

notify-send is not installed here, so a stand-in script on PATH records its argv (a mock, for that
reason only); the TUI's side, what it passes and how, is what is tested.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from nexus_clients.tui.app import NexusTui
from nexus_clients.tui.link import LinkUp
from tui_items import item

from nexusd import protocol

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake_notify_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "argv.json"
    script = tmp_path / "notify-send"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return log


async def test_notification_escapes_markup_and_controls(fake_notify_send: Path) -> None:
    app = NexusTui(connect=False, bell=False, desktop_notify=True)
    async with app.run_test() as pilot:
        app.on_daemon_event(LinkUp("t"))
        hostile = {"command": "<b>rm</b> -rf ~ & \x1b]0;x\x07 \u202e"}
        app.on_daemon_event(protocol.Prompt(item=item(1, "Bash", hostile, provider="claude")))
        for _ in range(100):
            if fake_notify_send.exists():
                break
            await pilot.pause(0.05)
    (argv,) = [json.loads(line) for line in fake_notify_send.read_text().splitlines()]
    assert argv[0] == "--app-name=nexus-tui" and argv[1] == "--"
    title, body = argv[2], argv[3]
    assert title == "nexus: Bash from claude"
    assert "&lt;b&gt;rm&lt;/b&gt;" in body and "&amp;" in body and "<" not in body
    assert "\\e]0;x\\x07" in body and "\\u202e" in body and "\x1b" not in body


async def test_no_notification_unless_asked(fake_notify_send: Path) -> None:
    app = NexusTui(connect=False, bell=False)
    async with app.run_test() as pilot:
        app.on_daemon_event(LinkUp("t"))
        app.on_daemon_event(protocol.Prompt(item=item(1)))
        await pilot.pause(0.3)
        assert app.bells == 1
    assert not fake_notify_send.exists()
