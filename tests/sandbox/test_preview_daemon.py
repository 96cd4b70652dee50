"""Preview before effect through the real daemon: ``[sandbox] preview = true``, an agent's allowed shell call
runs (real bash, real bubblewrap, real overlayfs) on an overlay; a person lists it with ``nexusctl pending``
and applies or discards it with ``nexusctl answer``; nobody answering discards; the agent reads the command's
output and a line saying which."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nexusd import protocol as p
from tests.conftest import DaemonHandle, short_tmpdir
from tests.daemon.conftest import raw_factory as raw_factory  # the fixture, shared
from tests.sandbox.conftest import wrapper_script

POLICY = """
[permissions]
allow = ["Read"]

[sandbox]
enabled = true
preview = true
"""
COMMAND = "echo changed > keep.txt; rm gone.txt; echo new > made.txt; echo printed; exit 5"


@pytest.fixture
def ws() -> Path:
    w = short_tmpdir() / "project"
    w.mkdir()
    (w / "keep.txt").write_text("one\n")
    (w / "gone.txt").write_text("precious\n")
    return w


def ctl(h: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from nexusd.cli.ctl import main; main()", *args],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def wrapped(h: DaemonHandle, raw_factory: Any, ws: Path, command: str) -> str:
    agent = raw_factory(h.socket)
    call = {
        "provider": "claude",
        "session": "s1",
        "tool": "Bash",
        "input": {"command": command},
        "cwd": str(ws),
        "workspace": str(ws),
        "mode": "bypassPermissions",
    }
    d = agent.ask({"type": "request", "call": call, "ref": "r"})
    agent.close()
    assert isinstance(d, p.Decision) and d.decision == "allow" and d.updated_input, d
    text = d.updated_input["command"]
    script = Path(wrapper_script(text)).read_text()
    assert "nexusd.sandbox.previewrun" in script, script
    return str(text)


def start(h: DaemonHandle, ws: Path, text: str) -> subprocess.Popen[str]:
    """Run what the agent runs, as the agent's shell does."""
    env = {k: v for k, v in h.env.items() if k != "NEXUS_SOCKET"}  # the wrapper names its daemon itself
    return subprocess.Popen(
        ["bash", "-c", text], cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_preview(h: DaemonHandle, proc: subprocess.Popen[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = ctl(h, "pending", "--json")
        assert r.returncode == 0, r.stderr
        items = [i for i in json.loads(r.stdout) if i["call"]["tool"] == "nexus:preview"]
        if items:
            return dict(items[0])
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.3)
    raise AssertionError("no preview was put to a person")


def test_apply_through_nexusctl(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY, sandbox=True)
    proc = start(h, ws, wrapped(h, raw_factory, ws, COMMAND))
    item = wait_preview(h, proc)
    assert (ws / "keep.txt").read_text() == "one\n" and (ws / "gone.txt").exists()  # nothing yet
    inp = item["call"]["input"]
    assert inp["exit_code"] == 5 and "+changed" in inp["diff"] and "-precious" in inp["diff"]
    shown = ctl(h, "pending")
    assert "+changed" in shown.stdout and "allow: apply" in shown.stdout, shown.stdout
    refused = ctl(h, "answer", item["id"], "allow", "--always")
    assert refused.returncode != 0 and "once" in refused.stderr + refused.stdout
    ok = ctl(h, "answer", item["id"], "allow")
    assert ok.returncode == 0, ok.stderr
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert out == "printed\n"
    assert "were APPLIED" in err, err
    assert (ws / "keep.txt").read_text() == "changed\n" and not (ws / "gone.txt").exists()
    assert (ws / "made.txt").read_text() == "new\n"
    # the person's allow took a checkpoint before the apply: the applied preview is in the history, rewindable
    hist = ctl(h, "history", "--json")
    (entry,) = [json.loads(line) for line in hist.stdout.splitlines() if '"nexus:preview"' in line]
    assert {f["path"]: f["status"] for f in entry["files"]} == {"gone.txt": "D", "keep.txt": "M", "made.txt": "A"}
    back = ctl(h, "rewind", str(entry["id"]))
    assert back.returncode == 0, back.stdout + back.stderr
    assert (ws / "keep.txt").read_text() == "one\n" and (ws / "gone.txt").read_text() == "precious\n"


def test_discard_through_nexusctl(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY, sandbox=True)
    proc = start(h, ws, wrapped(h, raw_factory, ws, COMMAND))
    item = wait_preview(h, proc)
    assert ctl(h, "answer", item["id"], "deny").returncode == 1
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5 and out == "printed\n"
    assert "DISCARDED" in err, err
    assert (ws / "keep.txt").read_text() == "one\n" and (ws / "gone.txt").read_text() == "precious\n"
    assert not (ws / "made.txt").exists()


def test_nobody_answering_discards(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY, sandbox=True, pending_timeout=3)
    proc = start(h, ws, wrapped(h, raw_factory, ws, COMMAND))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 5 and out == "printed\n"
    assert "DISCARDED" in err and "deadline" in err, err
    assert (ws / "keep.txt").read_text() == "one\n" and not (ws / "made.txt").exists()


def test_a_daemon_gone_discards(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY, sandbox=True)
    text = wrapped(h, raw_factory, ws, "echo changed > keep.txt; sleep 2")
    proc = start(h, ws, text)
    time.sleep(0.5)
    h.stop()
    _out, err = proc.communicate(timeout=120)
    assert (ws / "keep.txt").read_text() == "one\n", err
    assert "DISCARDED" in err or "refused" in err, err


def test_an_agent_cannot_answer_its_own_preview(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    h = daemon_factory(policy=POLICY, sandbox=True, pending_timeout=20)
    proc = start(h, ws, wrapped(h, raw_factory, ws, COMMAND))
    item = wait_preview(h, proc)
    agent = raw_factory(h.socket)  # role agent: gate management is refused
    r = agent.ask({"type": "answer", "id": item["id"], "decision": "allow", "ref": "a"})
    agent.close()
    assert isinstance(r, p.Error), r
    assert ctl(h, "answer", item["id"], "deny").returncode == 1
    proc.communicate(timeout=60)
    assert (ws / "keep.txt").read_text() == "one\n"


def test_the_engine_never_decides_a_preview(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    """A rule allowing everything, and a bypass mode, still leave a preview to a person (here: nobody, so
    the deadline discards)."""
    h = daemon_factory(
        policy=POLICY.replace('allow = ["Read"]', 'allow = ["Read", "nexus:preview", "*"]'), sandbox=True
    )
    agent = raw_factory(h.socket)
    call = {
        "provider": "claude",
        "session": "s1",
        "tool": "nexus:preview",
        "input": {"command": "x", "exit_code": 0, "summary": "s", "changes": [], "diff": ""},
        "cwd": str(ws),
        "workspace": str(ws),
        "mode": "bypassPermissions",
    }
    r = agent.ask({"type": "request", "call": call, "ref": "r"})
    assert isinstance(r, p.Pending), r
    agent.close()
    bad = raw_factory(h.socket)
    d = bad.ask({"type": "request", "call": {**call, "input": {"command": 1}}, "ref": "r"})
    bad.close()
    assert isinstance(d, p.Decision) and d.decision == "deny" and "malformed" in d.reason


def test_the_tui_shows_a_previews_diff() -> None:
    """The TUI's detail pane renders a preview's diff (pure rendering of the pending item the daemon sends)."""
    from nexus_clients.tui.request_view import detail
    from nexus_clients.tui.state import Entry

    diff = "# changed file keep.txt\n--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-one\n+changed\n\x1b[31mX\n"
    call = p.CallInfo(
        provider="claude",
        session="s1",
        tool="nexus:preview",
        input={
            "command": "echo changed > keep.txt",
            "exit_code": 0,
            "summary": "+0 ~1 -0",
            "changes": [],
            "diff": diff,
        },
        cwd="/w",
        workspace="/w",
    )
    verdict = p.Verdict("ask", "preview: apply?", "safety", flags=["require_human", "preview"])
    item = p.PendingItem(id="0" * 32, call=call, verdict=verdict, created=time.time(), deadline=time.time() + 60)
    text = "\n".join(t.plain for t in detail(Entry(item=item, seen_at=time.time()), time.time()))
    assert "allow applies it, deny discards it" in text
    assert "+changed" in text and "-one" in text
    assert "\x1b" not in text  # file content cannot drive the terminal
    assert text.count("+changed") == 1  # not again as raw arguments


def test_a_conflict_shown_to_the_person_is_overwritten_by_their_allow(
    daemon_factory: Any, raw_factory: Any, ws: Path
) -> None:
    """A path changed in the workspace while the command ran is named in the preview; the person's allow
    overwrites it. A path changed while the person reviewed (not shown) stops the whole apply."""
    h = daemon_factory(policy=POLICY, sandbox=True)
    cmd = "echo changed > keep.txt; echo new > made.txt; sleep 4"
    proc = start(h, ws, wrapped(h, raw_factory, ws, cmd))
    deadline = time.monotonic() + 60  # the preview's directory exists once its fingerprints are taken
    while not list(h.state_dir.glob("sandbox/*/preview/p-*/work/*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    (ws / "keep.txt").write_text("the person's edit during the run\n")
    item = wait_preview(h, proc)
    assert item["call"]["input"]["conflicts"] == ["keep.txt"]
    assert "overwrites them: keep.txt" in item["verdict"]["reason"]
    assert "CONFLICT" in item["call"]["input"]["diff"]
    assert ctl(h, "answer", item["id"], "allow").returncode == 0
    _out, err = proc.communicate(timeout=60)
    assert "were APPLIED" in err, err
    assert (ws / "keep.txt").read_text() == "changed\n"

    proc = start(h, ws, wrapped(h, raw_factory, ws, "echo again > made.txt; echo again > keep.txt"))
    item = wait_preview(h, proc)
    assert item["call"]["input"]["conflicts"] == []
    (ws / "made.txt").write_text("the person's edit during the review\n")
    assert ctl(h, "answer", item["id"], "allow").returncode == 0
    _out, err = proc.communicate(timeout=60)
    assert "NOT APPLIED" in err and "conflict: made.txt" in err, err
    assert (ws / "made.txt").read_text() == "the person's edit during the review\n"
    assert (ws / "keep.txt").read_text() == "changed\n"  # nothing was written


def test_a_previewed_command_reaches_an_allowed_domain(daemon_factory: Any, raw_factory: Any, ws: Path) -> None:
    """Preview and a filtered network together: the overlay runner passes the call's FIFOs on to
    bubblewrap, so the proxy's ports exist inside the previewed command too."""
    import http.server
    import threading

    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"from the allowed host\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        h = daemon_factory(
            policy=POLICY + f'\n[sandbox.network]\nallowed_domains = ["localhost:{port}"]\n', sandbox=True
        )
        command = f"curl -sS -m 20 http://localhost:{port}/ > got.txt; cat got.txt"
        proc = start(h, ws, wrapped(h, raw_factory, ws, command))
        item = wait_preview(h, proc)
        assert "+from the allowed host" in item["call"]["input"]["diff"]
        assert ctl(h, "answer", item["id"], "deny").returncode == 1
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == "from the allowed host\n", err
        assert not (ws / "got.txt").exists()  # discarded
    finally:
        server.shutdown()
        server.server_close()
