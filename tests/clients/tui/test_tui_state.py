"""The state model: queue order, selection that never jumps to another request, the arrival guard."""

from __future__ import annotations

from nexus_clients.tui.state import RESOLVED_KEEP, TuiState
from tui_items import T0, item

from nexusd import protocol


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def connected_state(clock: Clock, guard: float = 0.5) -> TuiState:
    s = TuiState(clock=clock, arrival_guard=guard)
    s.connected("test")
    return s


def test_queue_is_oldest_first_whatever_the_arrival_order() -> None:
    s = connected_state(Clock())
    s.apply_snapshot([item(3), item(1)])
    s.apply_prompt(item(2))
    assert [e.id for e in s.queue()] == [item(1).id, item(2).id, item(3).id]


def test_selection_never_leaves_a_waiting_request_on_its_own() -> None:
    s = connected_state(Clock())
    s.apply_prompt(item(5))
    assert s.selected == item(5).id
    s.apply_prompt(item(1))  # older, so it sorts above the selection
    s.apply_prompt(item(9))
    assert s.selected == item(5).id
    s.apply_snapshot([item(1), item(5), item(9)])
    assert s.selected == item(5).id


def test_when_the_selected_request_is_decided_elsewhere_the_selection_moves_on_guarded() -> None:
    clock = Clock()
    s = connected_state(clock, guard=0.5)
    s.apply_snapshot([item(1), item(2)])
    clock.now += 5
    assert s.answerable()[0] is not None
    s.apply_resolved(protocol.Resolved(id=item(1).id, decision="allow", source="user", answered_by="tui-2 (pid 7)"))
    assert "answered by tui-2 (pid 7)" in s.message
    assert s.selected == item(2).id
    assert "you were reading" in s.message, "the message names the old request, not the one now shown"
    entry, why = s.answerable()
    assert entry is None and "selection just moved" in why, "a key meant for the old request must not land here"
    clock.now += 0.6
    assert s.answerable()[0] is not None
    s.apply_resolved(protocol.Resolved(id=item(2).id, decision="deny", source="timeout"))
    assert s.selected == item(2).id, "nothing else waits: the last one stays, showing what happened"
    clock.now += 5
    s.apply_prompt(item(3))
    assert s.selected == item(3).id, "a decided selection gives way to the next request"
    assert "just arrived" in s.answerable()[1]


def test_choosing_a_request_by_hand_has_no_guard() -> None:
    clock = Clock()
    s = connected_state(clock, guard=0.5)
    s.apply_snapshot([item(1), item(2)])
    clock.now += 5
    s.apply_resolved(protocol.Resolved(id=item(1).id, decision="allow", source="user"))
    assert next(iter(s.entries)) == item(2).id, "a decided row never sits above a waiting one"
    s.move(1)
    s.move(-1)
    assert s.selected == item(2).id and s.answerable()[0] is not None


def test_arrival_guard_refuses_an_answer_to_a_request_that_just_appeared() -> None:
    clock = Clock()
    s = connected_state(clock, guard=0.5)
    s.apply_prompt(item(1))
    entry, why = s.answerable()
    assert entry is None and "just arrived" in why
    clock.now += 0.6
    entry, why = s.answerable()
    assert entry is not None and why == ""


def test_no_answer_when_disconnected_resolved_or_expired() -> None:
    clock = Clock()
    s = connected_state(clock, guard=0)
    s.apply_prompt(item(1, ttl=5))
    s.disconnected("gone")
    assert s.entries == {} and s.selected is None
    assert "nothing was sent" in s.answerable()[1]
    s.connected("test")
    s.apply_snapshot([item(1, ttl=20)])
    clock.now = item(1, ttl=20).deadline + 1
    assert "timed out" in s.answerable()[1]
    clock.now = T0
    s.apply_resolved(protocol.Resolved(id=item(1).id, decision="deny", source="timeout"))
    assert "timed out" in s.answerable()[1]


def test_snapshot_replaces_everything_and_keeps_arrival_times() -> None:
    clock = Clock()
    s = connected_state(clock)
    s.apply_prompt(item(1))
    clock.now += 10
    s.apply_snapshot([item(1), item(2)])
    assert s.entries[item(1).id].seen_at == T0
    assert s.entries[item(2).id].seen_at == T0 + 10
    s.apply_snapshot([item(2)])
    assert list(s.entries) == [item(2).id]
    assert s.selected == item(2).id


def test_moving_and_jumping_between_pending_requests() -> None:
    s = connected_state(Clock())
    s.apply_snapshot([item(1), item(2), item(3), item(4)])
    s.apply_resolved(protocol.Resolved(id=item(2).id, decision="deny", source="user"))
    assert s.selected == item(1).id
    s.next_pending()
    assert s.selected == item(3).id, "skips the answered one"
    s.next_pending()
    s.next_pending()
    assert s.selected == item(1).id, "wraps around"
    s.next_pending(-1)
    assert s.selected == item(4).id
    s.move(-1)
    assert s.selected == item(3).id
    s.move(2)
    assert s.selected == item(2).id, "plain movement visits answered ones too (below the waiting ones)"
    s.move(-10)
    assert s.selected == item(1).id


def test_answered_requests_are_pruned_after_a_while_but_never_the_selected_one() -> None:
    clock = Clock()
    s = connected_state(clock)
    s.apply_snapshot([item(1), item(2)])
    for n in (1, 2):
        s.apply_resolved(protocol.Resolved(id=item(n).id, decision="allow", source="user"))
    clock.now += RESOLVED_KEEP + 1
    s.prune()
    assert s.selected == item(2).id
    assert list(s.entries) == [item(2).id]


def test_outcome_lines() -> None:
    s = connected_state(Clock())
    s.apply_snapshot([item(1), item(2), item(3)])
    s.apply_resolved(protocol.Resolved(id=item(1).id, decision="deny", source="timeout"))
    s.apply_resolved(protocol.Resolved(id=item(2).id, decision="allow", source="user", answered_by="x", scope="always"))
    s.apply_resolved(protocol.Resolved(id=item(3).id, decision="deny", source="cancelled"))
    assert s.entries[item(1).id].outcome() == "denied: timed out (nobody answered)"
    assert s.entries[item(2).id].outcome() == "allow (always), answered by x"
    assert "went away" in s.entries[item(3).id].outcome()
    s.apply_snapshot([item(4)])
    s.apply_resolved(protocol.Resolved(id=item(4).id, decision="deny", source="hook", reason="denied by hook x: no"))
    assert s.entries[item(4).id].outcome() == "denied by a policy hook before anyone answered: denied by hook x: no"
