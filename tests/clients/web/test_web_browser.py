"""The web inbox in a real browser: Debian's chromium, headless, driven by Playwright, against a real
daemon, a real ``nexus-web`` and real asks from ``nexus-hook claude``.

Screenshots of the queue and of an answered request are kept under pytest's tmp dir (their paths are
printed) as artifacts a person can look at.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nexusd import protocol
from nexusd.client import Client
from tests.clients.test_hook import claude_input, run_hook  # the hook exactly as Claude Code runs it
from tests.clients.web.conftest import WebHandle


class HookRun:
    """``nexus-hook claude`` in a thread: a real process, waiting for a person's answer."""

    def __init__(
        self,
        env: dict[str, str],
        command: str,
        session: str = "sess-web",
        tool: str = "Bash",
        tool_input: dict[str, Any] | None = None,
    ) -> None:
        self.result: Any = None
        stdin = claude_input(tool=tool, tool_input=tool_input or {"command": command}) | {"session_id": session}
        self.thread = threading.Thread(target=self._run, args=(env, stdin), daemon=True)
        self.thread.start()

    def _run(self, env: dict[str, str], stdin: dict[str, Any]) -> None:
        self.result = run_hook(["claude", "--timeout", "50"], stdin, env, timeout=60)

    def decision(self, timeout: float = 30) -> dict[str, Any]:
        self.thread.join(timeout)
        assert self.result is not None, "the hook never finished"
        assert self.result.returncode == 0, self.result.stderr
        return json.loads(self.result.stdout)["hookSpecificOutput"]


def audit(web: WebHandle, **filters: Any) -> list[protocol.AuditRecord]:
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        return c.call(protocol.Audit(**filters)).records


def signed_in(open_page: Callable[[str], Any], web: WebHandle, name: str) -> Any:
    page = open_page(name)
    page.goto(web.url)
    assert page.url == web.base + "/", "the token is dropped from the address bar"
    page.wait_for_selector("#conn.up")
    return page


def test_ask_appears_live_is_answered_and_audited(web: WebHandle, browser_factory: Any, tmp_path: Path) -> None:
    page = signed_in(browser_factory, web, "one")
    origin = page.evaluate("performance.timeOrigin")
    hook = HookRun(web.daemon.env, "mkdir -p build/out")
    row = page.wait_for_selector(".queue-item", timeout=20_000)
    assert "mkdir -p build/out" in row.inner_text()
    assert page.evaluate("performance.timeOrigin") == origin, "no reload: the ask arrived over server-sent events"
    detail = page.locator("#detail")
    assert "mkdir -p build/out" in detail.locator("#d-what").inner_text()
    assert detail.locator("#d-session").inner_text() == "sess-web"
    assert "s" in page.locator("#d-countdown").inner_text()
    page.screenshot(path=str(tmp_path / "queue.png"), full_page=True)
    print("screenshot:", tmp_path / "queue.png")

    page.fill("#d-message", "fine, from the browser test")
    page.click("button[data-act=allow_once]")  # Playwright waits until the arrival guard enables it
    out = hook.decision()
    assert out["permissionDecision"] == "allow"
    assert "fine, from the browser test" in out["permissionDecisionReason"]
    page.wait_for_selector("#d-outcome:not([hidden])")
    assert "answered by nexus-web (pid" in page.locator("#d-outcome").inner_text()
    page.screenshot(path=str(tmp_path / "request.png"), full_page=True)
    print("screenshot:", tmp_path / "request.png")

    records = [r for r in audit(web, source="user") if r.session == "sess-web"]
    assert records and records[-1].decision == "allow"
    assert (records[-1].answered_by or "").startswith("nexus-web (pid ")

    # the history tab finds it with the audit query's filters
    page.click("button[data-tab=history]")
    page.fill("input[name=session]", "sess-web")
    page.click("#audit-form button[type=submit]")
    page.wait_for_selector("#audit tbody tr")
    assert "nexus-web (pid" in page.locator("#audit tbody").inner_text()


def test_key_on_a_request_that_just_appeared_is_not_an_answer(web: WebHandle, browser_factory: Any) -> None:
    """The key arrives in the same moment the request is drawn (pressed from the page, as the row appears): a key
    sent from the test after it saw the row could come later than the guard on a loaded machine."""
    page = signed_in(browser_factory, web, "keys")
    page.evaluate("""() => new MutationObserver((_, watch) => {
        if (!document.querySelector("#queue .queue-item")) return;
        watch.disconnect();
        document.dispatchEvent(new KeyboardEvent("keydown", {key: "y", bubbles: true}));
    }).observe(document.getElementById("queue"), {childList: true, subtree: true})""")
    hook = HookRun(web.daemon.env, "mkdir -p build/keys")
    page.wait_for_selector("#message:has-text('just arrived')")
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        assert c.status().pending == 1, "the key press answered nothing"
    page.wait_for_selector("button[data-act=deny]:not([disabled])")
    page.keyboard.press("n")
    assert hook.decision()["permissionDecision"] == "deny"


def test_deny_with_message_and_never_rule_editor(web: WebHandle, browser_factory: Any) -> None:
    page = signed_in(browser_factory, web, "never")
    hook = HookRun(web.daemon.env, "mkdir -p build/never")
    page.wait_for_selector(".queue-item")
    page.fill("#d-message", "not now")
    page.click("button[data-act=never]")
    page.wait_for_selector("#dialog:not([hidden])")
    rules = page.locator("#dlg-edit").input_value()
    assert rules.strip(), "never offers a rule to persist"
    page.wait_for_selector("#dlg-rules li.check-ok")  # the daemon's check of the rule
    page.click("#dlg-go")
    out = hook.decision()
    assert out["permissionDecision"] == "deny" and "not now" in out["permissionDecisionReason"]
    records = [r for r in audit(web, source="user") if r.session == "sess-web"]
    assert records[-1].scope == "never"
    page.click("button[data-tab=rules]")
    page.wait_for_selector("#rules tbody tr")
    rule = rules.splitlines()[0]
    learned = page.locator("#rules tbody tr", has_text=rule)
    assert learned.count() == 1 and "deny" in learned.inner_text()
    page.on("dialog", lambda dialog: dialog.accept())
    learned.locator("button").click()  # remove, through the protocol's rule_change
    # the row goes once the page reloaded the rules after the removal (its "Removed" message can be replaced at
    # once by "Policy reloaded.", as the daemon reloads the learned file, so the message is not waited for)
    learned.first.wait_for(state="detached")
    assert "Not removed" not in page.locator("#message").inner_text()
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        assert rule not in [r.rule for r in c.call(protocol.Rules()).rules]


def test_second_browser_loses_cleanly(web: WebHandle, browser_factory: Any) -> None:
    first = signed_in(browser_factory, web, "first")
    second = signed_in(browser_factory, web, "second")
    hook = HookRun(web.daemon.env, "mkdir -p build/race")
    first.wait_for_selector(".queue-item")
    second.wait_for_selector(".queue-item")
    rid = second.locator(".queue-item").first.get_attribute("data-id")
    first.click("button[data-act=deny]")
    assert hook.decision()["permissionDecision"] == "deny"
    second.wait_for_selector("#d-outcome:not([hidden])")
    assert "deny" in second.locator("#d-outcome").inner_text()
    # the second browser answers anyway (a click already under way): refused, and it says who won
    status, reply = second.evaluate(
        """async (rid) => {
            const csrf = document.querySelector('meta[name="nexus-csrf"]').content;
            const r = await fetch('/api/answer', {method: 'POST', headers: {'content-type': 'application/json',
                'x-nexus-csrf': csrf}, body: JSON.stringify({id: rid, decision: 'allow'})});
            return [r.status, await r.json()];
        }""",
        rid,
    )
    assert status == 409 and "answered by nexus-web" in reply["error"], reply
    assert [r.decision for r in audit(web, source="user") if r.session == "sess-web"] == ["deny"]


def test_status_and_rules_pages(web: WebHandle, browser_factory: Any) -> None:
    page = signed_in(browser_factory, web, "status")
    page.click("button[data-tab=status]")
    page.wait_for_selector("#sources tbody tr")
    text = page.locator("#tab-status").inner_text()
    assert "user" in text and "sandbox" in text
    page.click("button[data-tab=rules]")
    page.wait_for_selector("#rules tbody", state="attached")
    assert "Rules:" not in page.locator("#message").inner_text()


def test_daemon_gone_the_page_says_so_and_nothing_is_kept_to_send(web: WebHandle, browser_factory: Any) -> None:
    page = signed_in(browser_factory, web, "gone")
    hook = HookRun(web.daemon.env, "mkdir -p build/gone")
    page.wait_for_selector(".queue-item")
    web.daemon.stop()
    page.wait_for_selector("#conn.down")
    assert "unreachable" in page.locator("#conn").inner_text() or "stopping" in page.locator("#conn").inner_text()
    page.wait_for_selector(".queue-item", state="detached")  # the daemon denied everything pending
    assert hook.decision()["permissionDecision"] == "deny"
    empty = page.locator("#empty").inner_text()
    assert "nexusd unreachable" in empty and "Nothing is waiting" not in empty
    assert "answered by error" not in page.locator("body").inner_text()
    web.daemon.start()
    page.wait_for_selector("#conn.up", timeout=30_000)  # nexus-web reconnects by itself


def test_an_edit_shows_its_diff_and_hidden_characters(web: WebHandle, browser_factory: Any, tmp_path: Path) -> None:
    target = tmp_path / "config.py"
    target.write_text("DEBUG = False\nPORT = 8080\n")
    page = signed_in(browser_factory, web, "diff")
    edit = {"file_path": str(target), "old_string": "DEBUG = False", "new_string": "DEBUG = True  # \u202eoops"}
    hook = HookRun(web.daemon.env, "", tool="Edit", tool_input=edit)
    page.wait_for_selector("#d-diff-box:not([hidden])")
    diff = page.locator("#d-diff").inner_text()
    assert "-DEBUG = False" in diff and "+DEBUG = True" in diff
    assert "\\u202e" in diff and "\u202e" not in diff, "the bidi override is shown as an escape, not obeyed"
    assert not page.locator("#d-hidden").is_hidden()
    page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    print("screenshot:", tmp_path / "diff.png")
    page.click("button[data-act=deny]")
    assert hook.decision()["permissionDecision"] == "deny"
    assert target.read_text().startswith("DEBUG = False")


def test_allow_for_session_and_always_with_the_rule_editor(web: WebHandle, browser_factory: Any) -> None:
    page = signed_in(browser_factory, web, "always")
    hook = HookRun(web.daemon.env, "mkdir -p build/one", session="sess-always")
    page.wait_for_selector(".queue-item")
    page.wait_for_selector("button[data-act=allow_session]:not([disabled])")
    page.keyboard.press("s")  # shows the rule(s) it would grant, checked by the daemon, before granting
    page.wait_for_selector("#dialog:not([hidden]) #dlg-rules li.check-ok")
    page.click("#dlg-go")
    assert hook.decision()["permissionDecision"] == "allow"
    hook = HookRun(web.daemon.env, "touch build/two.txt", session="sess-always")
    page.wait_for_selector(".queue-item:not(.done)")
    page.click("button[data-act=always]")
    page.wait_for_selector("#dialog:not([hidden])")
    rules = [r for r in page.locator("#dlg-edit").input_value().splitlines() if r.strip()]
    assert rules, "always offers the engine's suggestions"
    page.wait_for_selector("#dlg-rules li.check-ok")
    page.click("#dlg-go")
    assert hook.decision()["permissionDecision"] == "allow"
    scopes = [r.scope for r in audit(web, source="user") if r.session == "sess-always"]
    assert scopes == ["session", "always"]
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        learned = [r.rule for r in c.call(protocol.Rules()).rules if r.kind == "allow"]
    assert rules[0] in learned


def test_grants_are_listed_and_revoked_from_the_page(web: WebHandle, browser_factory: Any) -> None:
    """The grants issue's "one place to see and revoke": a session grant given from the page shows in its
    Grants tab and is revoked there; the next identical call is asked again."""
    page = signed_in(browser_factory, web, "grants")
    hook = HookRun(web.daemon.env, "mkdir -p build/three", session="sess-grants")
    page.wait_for_selector(".queue-item")
    page.wait_for_selector("button[data-act=allow_session]:not([disabled])")
    page.keyboard.press("s")
    page.wait_for_selector("#dialog:not([hidden]) #dlg-rules li.check-ok")
    page.click("#dlg-go")
    assert hook.decision()["permissionDecision"] == "allow"
    page.click("button.tab[data-tab=grants]")
    page.wait_for_selector("#grants tbody tr")
    text = page.locator("#grants tbody").inner_text()
    assert "sess-grants" in text and "session" in text and "nexus-web" in text
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        before = [g for g in c.grants() if g.session == "sess-grants"]
    assert len(before) == 1
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#grants tbody tr button")
    page.wait_for_selector("#message:has-text('Revoked')")  # (the page's CSP forbids wait_for_function's eval)
    with Client(socket_path=str(web.daemon.socket), role="admin", name="test") as c:
        assert not [g for g in c.grants() if g.session == "sess-grants"]
