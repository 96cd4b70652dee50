"""Wire types shared by the daemon and every client.

One UTF-8 JSON object per line, a tagged union on the ``type`` field. This module imports only msgspec,
the standard library and the stdlib-only ``nexusd.conversation`` (which states the version) because
clients spawned once per call import it on their hot path. ``docs/PROTOCOL.md`` documents every message;
keep the two in step.

Every client message may carry ``ref``, a client-chosen correlation string that the daemon echoes on
the reply (and on errors caused by that message), so one connection can multiplex calls.
"""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

import msgspec

from nexusd.protocol_version import PROTOCOL_VERSION as PROTOCOL_VERSION  # stated once, below protocol and conversation

MAX_LINE_BYTES = 1 << 20  # default framing limit; the daemon may be configured lower, never higher

Role = Literal["agent", "ui", "admin"]
DecisionKind = Literal["allow", "deny", "ask"]
Source = Literal[
    "rule",  # an allow/ask/deny rule decided
    "mode",  # the session's mode decided (sufficient, or escalation)
    "safety",  # a safety check (protected path, catastrophic command, unparseable input)
    "hook",  # an external policy hook decided
    "classifier",  # auto mode's external classifier decided
    "user",  # a person answered
    "timeout",  # nobody answered before the deadline
    "cancelled",  # the requester went away or cancelled
    "error",  # something failed; always a deny
    "default",  # nothing matched: the final deny of the decision order
]
Scope = Literal["once", "session", "always", "never", "timed"]  # timed: with Answer.duration
NoUi = Literal["deny", "ask"]
ErrorCode = Literal[
    "bad_json",
    "line_too_long",
    "invalid_message",
    "unknown_type",
    "wrong_role",
    "not_found",
    "already_decided",
    "protocol_version",
    "self_approval",
    "forbidden",
    "internal",
    "refused",  # the policy store refused a change (learn, rule_change, trust_change); nothing changed
    "policy_error",  # reload failed; the last good policy stays in force
    "timeout",  # idle too long, or a line not finished in time; the connection is closed
]


def wire_tag(class_name: str) -> str:
    """The one naming rule: a message's ``type`` on the wire is its class name in snake_case
    (``SandboxPlanReply`` -> ``sandbox_plan_reply``), so a name is said once."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


class _Msg(msgspec.Struct, tag_field="type", tag=wire_tag, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every message: strict (unknown fields are errors), compact on the wire, tagged by
    ``wire_tag`` of its class name (inherited by every subclass)."""


# --------------------------------------------------------------------------- shared data


class TraceStep(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One step of the decision order that ran, in order."""

    step: str  # deny_rules, hooks, ask_rules, safety, allow_rules, mode, classifier, escalation, final
    outcome: str  # matched, passed, skipped, allow, ask, deny, error ...
    detail: str = ""


class CallDetails(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What the classifier found, for people: sub-commands, files, domain, and why it was flagged."""

    kind: str  # read | edit | shell | fetch | search | mcp | agent | other
    tool: str  # canonical tool name (Claude's spelling)
    commands: list[list[str]] = []  # argv of every simple command, wrappers peeled
    reads: list[str] = []
    writes: list[str] = []
    domain: str | None = None
    notes: list[str] = []  # one line per flag, e.g. "writes outside the workspace: /etc/x"


class Verdict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What the engine decided for one tool call, and why."""

    decision: DecisionKind
    reason: str
    source: Source
    rule: str | None = None  # the rule that decided, as written
    rule_origin: str | None = None  # "path:line" or "builtin" or "session"
    requirement: str | None = None  # read-only | workspace-write | danger-full-access
    tier: str | None = None  # the tool's own tier: safe | cautious | dangerous (docs/POLICY.md, tool tiers)
    flags: list[str] = []  # checks that flagged the call (see docs/POLICY.md)
    suggestions: list[str] = []  # the narrowest rules "always" would persist (empty: refuse)
    trace: list[TraceStep] = []
    details: CallDetails | None = None


class SandboxProbe(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What the capability probe found; ``available`` means a real sandbox ran."""

    platform: str  # linux | wsl2 | wsl1 | macos | other
    available: bool
    backend: str | None = None  # bwrap | unshare | sandbox-exec
    container: str | None = None  # docker | podman | lxc | ... when detected
    checks: dict[str, str] = {}  # check name -> "ok" or the reason it failed
    reason: str = ""  # why unavailable, or the reduced guarantees of a fallback


# The longest path a system call takes (Linux PATH_MAX, the terminating NUL included): no tool can use a
# longer one, and walking one component at a time costs quadratic time (a 120 KB cwd: seconds).
PATH_MAX = 4096
PathText = Annotated[str, msgspec.Meta(max_length=PATH_MAX)]


class CallInfo(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A tool call as agents submit it: the canonical request shape across providers."""

    provider: str  # claude | gemini | codex | mcp | other
    session: str  # the agent's session id
    tool: str  # the tool name as the agent spells it
    input: dict[str, Any]
    cwd: PathText  # a longer one is refused as an invalid message (no process has it)
    mode: str | None = None  # the agent's permission mode, in its own spelling
    agent_request_id: str | None = None  # e.g. Claude's tool_use_id
    agent_pid: int | None = None  # the agent process (the hook's parent), attribution only
    workspace: PathText | None = None  # the project root if the agent knows it (CLAUDE_PROJECT_DIR)
    transcript_path: PathText | None = None  # the agent's conversation (Claude's hook input), for auto mode's reviewer
    subagent_id: str | None = None  # the subagent making the call (hook input's agent_id), attribution only
    subagent_type: str | None = None  # its kind (hook input's agent_type, e.g. "Explore"), attribution only
    # bytes of input strings too large to carry at all (nexusd.conversation.MAX_UPLOAD_CHARS): counted as
    # written, so such a Write is refused as over seed 000's 10 MB with its real size
    omitted_bytes: int = 0


class PendingItem(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A request waiting for a person, as UIs see it."""

    id: str  # 128-bit unguessable hex id; the handle UIs answer with
    call: CallInfo
    verdict: Verdict  # the engine's ask verdict (flags, requirement, suggestions, trace)
    created: float  # unix time
    deadline: float  # unix time of the automatic deny
    peer_pid: int | None = None
    hold_limit: float | None = None  # unix time a person's Hold may push the deadline to (None: cannot be held)


# --------------------------------------------------------------------------- client -> daemon


class Hello(_Msg):
    proto: int
    role: Role
    name: str
    ref: str | None = None


class Request(_Msg):
    """An agent asks whether a tool call may run. Answered by Decision (after Pending, if a person is asked)."""

    call: CallInfo
    on_no_ui: NoUi = "deny"  # when no person is reachable through nexusd
    # input key -> upload id: the key's string came before in ``part`` lines (a Write's content over the line
    # limit); the daemon puts it back into ``call.input`` before anything reads the call
    uploads: dict[str, str] = {}
    # the longest this requester waits for the Decision (its agent's hook timeout less its own margin): a
    # person's Hold may push the deadline up to it, never past it; None: the deadline cannot be held
    max_wait: Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None = None
    ref: str | None = None


class Part(_Msg):
    """One piece of a large string of the next request's tool input, in order (no reply; see Request.uploads).
    A line stays under the framing limit however large the content: ``nexusd.conversation`` sends them."""

    upload: str  # the client's id for this string on this connection
    text: str
    ref: str | None = None  # unused: a part has no reply


class Cancel(_Msg):
    id: str  # the pending id from Pending
    ref: str | None = None


class Subscribe(_Msg):
    """A UI asks for a Snapshot of everything pending, then a stream of Prompt and Resolved."""

    ref: str | None = None


class Answer(_Msg):
    id: str
    decision: Literal["allow", "deny"]
    scope: Scope = "once"
    message: str | None = None  # shown to the model
    rules: list[str] | None = None  # for always/never: the (edited) rules to persist
    abort: bool = False  # deny, and stop the agent's turn where its contract can (deny only)
    duration: float | None = None  # scope timed only: seconds the grant lasts (0 < duration <= 30 days)
    # allow once with a changed input (edit before approving): decided again by the gate, must not widen
    updated_input: dict[str, Any] | None = None
    # allow with rules beyond once: the person saw each rule's rule_check reason and confirmed the ones
    # marked "confirm" (a wildcard over a program that destroys or runs the project's code)
    confirm_broad: bool = False
    ref: str | None = None


class Hold(_Msg):
    """A person is reading a pending request: push its deadline to ``seconds`` from now, at most to what the
    requester can wait (its ``max_wait``). Answered by Ack; every UI gets Held. Only delays a deny."""

    id: str
    seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 60.0
    ref: str | None = None


class RuleCheck(_Msg):
    """How narrow rules are, by the one check every UI shows (answered by RuleCheckReply); decides nothing."""

    kind: Literal["allow", "deny"]
    rules: Annotated[list[Annotated[str, msgspec.Meta(max_length=4000)]], msgspec.Meta(max_length=50)]
    ref: str | None = None


class Status(_Msg):
    ref: str | None = None


class Grants(_Msg):
    """List every grant in force (answered by GrantsReply)."""

    ref: str | None = None


class SessionEnd(_Msg):
    """An agent session ended: its session allow grants end with it (answered by Ack). Only narrows: the
    session's deny answers and a person's mode override stay."""

    session: str
    ref: str | None = None


class RevokeGrant(_Msg):
    """Take a grant back; it no longer applies from the next call on (answered by Ack)."""

    id: str
    ref: str | None = None


class Check(_Msg):
    """Evaluate a call without side effects; answered by CheckResult."""

    call: CallInfo
    ref: str | None = None


class SetMode(_Msg):
    session: str
    mode: str | None  # None clears the person's override
    ref: str | None = None


class Reload(_Msg):
    ref: str | None = None


class Rules(_Msg):
    ref: str | None = None


class RuleChange(_Msg):
    """Add or remove a learned rule (admin and ui roles)."""

    action: Literal["add", "remove"]
    kind: Literal["allow", "ask", "deny"]
    rule: str
    ref: str | None = None


class TrustChange(_Msg):
    action: Literal["add", "remove"]
    path: str
    ref: str | None = None


class Probe(_Msg):
    refresh: bool = False
    ref: str | None = None


class Audit(_Msg):
    """Recent audit records, newest last; filters are exact matches."""

    limit: int = 200
    session: str | None = None
    tool: str | None = None
    decision: DecisionKind | None = None
    source: Source | None = None
    id: str | None = None  # one record by its audit id: with its trace, the wire's "explain"
    ref: str | None = None


class Ping(_Msg):
    """Keeps an otherwise silent connection (a UI waiting for prompts) from being closed as idle; answered by Pong."""

    ref: str | None = None


class SandboxPlan(_Msg):
    """Ask how a shell command would run sandboxed for a session (argv to exec, or a refusal)."""

    command: str
    cwd: PathText
    session: str | None = None
    workspace: PathText | None = None  # the writable root (default: cwd)
    ref: str | None = None


class SandboxReport(_Msg):
    """What the sandbox refused while a command ran (from the runner): recorded and shown to every UI."""

    command: str
    cwd: PathText
    violations: list[str]
    session: str | None = None
    exit_code: int | None = None
    ref: str | None = None


class History(_Msg):
    """Past calls that could change a workspace, each with its checkpoint and what it changed (answered by
    HistoryReply). ``id``: one call, with its diff when ``diff``; ``paths`` narrow that diff. Refused from an
    agent's process tree: checkpoints hold file contents the policy may keep from agents (docs/UNDO.md)."""

    session: str | None = None
    workspace: PathText | None = None
    id: int | None = None
    diff: bool = False
    paths: list[PathText] = []
    limit: int = 200
    ref: str | None = None


class Rewind(_Msg):
    """Restore a workspace (or ``paths`` in it) to the checkpoint taken before call ``id`` (answered by
    RewindReply). A rescue checkpoint is taken first, so a rewind can be rewound. ``dry_run``: say what
    would change, change nothing. Without ``force``, refused when it would overwrite changes made after the
    call by someone other than the gated calls. A person's act: refused from an agent's process tree."""

    id: int
    dry_run: bool = False
    force: bool = False
    paths: list[PathText] = []
    ref: str | None = None


ClientMessage = (
    Hello
    | Request
    | Part
    | Cancel
    | Subscribe
    | Answer
    | Status
    | Check
    | SetMode
    | Reload
    | Rules
    | RuleChange
    | TrustChange
    | Probe
    | SandboxPlan
    | SandboxReport
    | Audit
    | Ping
    | Grants
    | RevokeGrant
    | SessionEnd
    | History
    | Rewind
    | Hold
    | RuleCheck
)


# --------------------------------------------------------------------------- daemon -> client


class Welcome(_Msg):
    proto: int
    version: str
    role: Role
    sandbox: SandboxProbe | None = None
    idle_timeout: float | None = None  # seconds of silence after which the daemon closes the connection
    ref: str | None = None


class Pending(_Msg):
    """A person is being asked; the Decision follows, at the latest at ``deadline``."""

    id: str
    deadline: float
    ref: str | None = None


class Decision(_Msg):
    """The answer to a Request. Anything but ``allow`` means the call must not run as submitted."""

    decision: DecisionKind
    reason: str
    source: Source
    id: str | None = None  # the pending id, if a person was asked
    rule: str | None = None
    rule_origin: str | None = None
    updated_input: dict[str, Any] | None = None  # run this instead (e.g. sandboxed command)
    message: str | None = None  # a person's message to the model
    answered_by: str | None = None  # "ui-name (pid N)" when a person decided
    abort: bool = False  # a person stopped the agent's turn: the adapter tells the agent to stop
    ref: str | None = None


class Snapshot(_Msg):
    items: list[PendingItem]
    ref: str | None = None


class Prompt(_Msg):
    item: PendingItem


class Resolved(_Msg):
    id: str
    decision: DecisionKind
    source: Source
    reason: str = ""
    answered_by: str | None = None
    scope: Scope | None = None


class Ack(_Msg):
    ref: str | None = None
    detail: str = ""


class Held(_Msg):
    """Pushed to UIs: a person held a pending request; its deadline is now ``deadline`` (unix time)."""

    id: str
    deadline: float
    limit: float  # unix time past which it cannot be held (the requester stops waiting)
    by: str = ""


class RuleVerdict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    rule: str
    status: Literal["ok", "confirm", "refused"]  # confirm: only with Answer.confirm_broad
    reason: str


class RuleCheckReply(_Msg):
    results: list[RuleVerdict]
    ref: str | None = None


class Pong(_Msg):
    ref: str | None = None


class Error(_Msg):
    code: ErrorCode
    message: str
    ref: str | None = None


class PolicySource(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    layer: str  # managed | user | project | learned | claude-* | builtin
    path: str
    loaded: bool
    error: str | None = None
    last_good: bool = False  # the file is broken, but its last good version is what is enforced

    def state(self) -> str:
        """One phrase for people: loaded, broken with its last good version enforced, or not loaded."""
        if self.loaded:
            return "loaded"
        if self.last_good:
            return f"BROKEN, its last good version is enforced: {self.error}"
        return f"NOT loaded: {self.error}"


class StatusReply(_Msg):
    version: str
    pid: int
    uptime: float
    connections: dict[str, int]  # by role
    pending: int
    # "decision/source" -> count; "memo/hit|miss|stale" (the decision memo); "gate/calls" and "gate/ns"
    # (inline decisions and their summed wall time): ``decisions()`` and ``decision_time_us()`` read them
    counters: dict[str, int]
    policy: list[PolicySource]
    policy_errors: list[str]
    sandbox: SandboxProbe | None = None
    sessions: dict[str, str] = {}  # session id -> effective mode
    # fail-closed states (docs/SECURITY.md "When things break"):
    locked: str | None = None  # why nothing is allowed by a rule or a mode (a layer unusable, no last good copy)
    audit_error: str | None = None  # why the audit log cannot be written right now
    audit_unrecorded: int = 0  # decisions not recorded since start
    audit_on_failure: str = "continue"  # continue | deny
    audit_path: str | None = None  # the audit file the daemon writes
    audit_head: str | None = None  # hash of the last audit line on disk (the chain's head) ...
    audit_lines: int = 0  # ... and how many chain lines the current audit file holds up to it
    ref: str | None = None

    def decisions(self) -> dict[str, int]:
        """The "decision/source" counters alone (not the memo's or the gate timing's)."""
        return {k: v for k, v in self.counters.items() if not k.startswith(_NOT_DECISIONS)}

    def decision_time_us(self) -> float | None:
        """Mean wall time of the gate's inline decision since start, µs; None before the first."""
        calls = self.counters.get("gate/calls", 0)
        return self.counters.get("gate/ns", 0) / calls / 1000.0 if calls else None


_NOT_DECISIONS = ("memo/", "gate/")


class CheckResult(_Msg):
    verdict: Verdict
    ref: str | None = None


class RuleInfo(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    kind: Literal["allow", "ask", "deny"]
    rule: str
    layer: str
    origin: str  # path:line, or "session:<id>"
    removable: bool = False
    warning: str | None = None


class GrantInfo(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One grant: a rule a person gave beyond one call (docs/POLICY.md "Grants")."""

    id: str
    kind: Literal["allow", "deny"]
    rule: str
    scope: Literal["session", "timed", "learned"]
    session: str | None = None  # scope session: the agent session it belongs to
    given_by: str | None = None  # the answering UI's connection ("name (pid N)"); None: not recorded
    ui: str | None = None  # the answering client's name
    given_at: float | None = None  # epoch seconds
    expires: float | None = None  # scope timed: epoch seconds
    uses: int = 0  # calls it decided since it was given (or since the daemon started, for learned rules)
    origin: str | None = None  # scope learned: the rule's file and line


class GrantsReply(_Msg):
    grants: list[GrantInfo]
    ref: str | None = None


class RulesReply(_Msg):
    rules: list[RuleInfo]
    trusted: list[str] = []
    ref: str | None = None


class ProbeReply(_Msg):
    probe: SandboxProbe
    ref: str | None = None


class SandboxPlanReply(_Msg):
    allowed: bool
    argv: list[str] = []  # exec this to run the command sandboxed
    reason: str = ""
    backend: str | None = None  # bwrap | unshare; None: unsandboxed (only when the policy allows it)
    scrub: list[str] = []  # protected paths missing now: remove them after the command if it planted them
    # nested protection: roots walked after the command; protected paths below them that were not in
    # protected_before were planted by it and are removed
    scrub_below: list[str] = []
    protected_before: list[str] = []
    # the workspace's sandbox settings as the gate applies them (for status screens)
    transparent: bool = False  # agents' allowed shell calls here are rewritten to run sandboxed
    auto_allow: bool = False  # auto_allow_bash_if_sandboxed is on here
    network: str = "isolated"  # isolated | filtered (through the daemon's proxy) | open
    unix_sockets: str = "closed"  # closed (seccomp filter) | named (closed but allow_unix_sockets, supervised) | open
    # filtered: two FIFOs the daemon serves for this plan; the runner opens proxy_info read-write and
    # proxy_go read-only and passes them as the descriptors argv's --info-fd and --block-fd name
    # (bubblewrap reports to the daemon, which makes the proxy's ports inside before the command starts).
    # None: the command runs with no network
    proxy_info: str | None = None
    proxy_go: str | None = None
    ref: str | None = None


class AuditRecord(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One line of ``<state-dir>/audit.jsonl``: one decision."""

    time: float
    id: str  # pending id, or a fresh id for decisions made without a person
    provider: str
    session: str
    tool: str
    summary: str  # the command, path or URL, truncated and escaped
    decision: DecisionKind
    source: Source
    reason: str
    cwd: str = ""
    rule: str | None = None
    rule_origin: str | None = None
    peer_pid: int | None = None
    agent_pid: int | None = None
    answered_by: str | None = None
    answer_pid: int | None = None
    scope: Scope | None = None
    tier: str | None = None  # the tool's tier: safe | cautious | dangerous
    mode: str | None = None  # the internal mode the call was decided in (docs/POLICY.md's table)
    requirement: str | None = None  # what the call needs: read-only | workspace-write | danger-full-access
    message: str | None = None  # a person's message to the model, as sent
    abort: bool = False  # the person also stopped the agent's turn
    latency_ms: float = 0.0
    workspace: str | None = None  # the call's workspace, when the agent said
    subagent_id: str | None = None  # the call's subagent (attribution)
    subagent_type: str | None = None
    event: str = "decision"  # decision | self_approval_refused | sandbox_violation | network_close ...
    bytes_up: int | None = None  # network_close: what a proxied connection sent and received
    bytes_down: int | None = None
    trace: list[TraceStep] = []  # provenance: the engine's, the gate's and the daemon's steps (nexusctl explain)
    prev: str = ""  # SHA-256 (hex) of the audit line before this one: the hash chain (nexusctl audit verify)


class AuditReply(_Msg):
    records: list[AuditRecord]
    ref: str | None = None


class PolicyNotice(_Msg):
    """Pushed to UIs when a reload fails or succeeds, so people see broken policy at once."""

    ok: bool
    errors: list[str] = []


class Bye(_Msg):
    """The daemon is stopping; every pending request has been denied."""

    reason: str


class SandboxNotice(_Msg):
    """Pushed to UIs: a sandboxed command was refused something (see SandboxReport)."""

    command: str
    cwd: str
    violations: list[str]
    session: str | None = None
    time: float = 0.0


class FileChange(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One file a call changed: A added, M changed, D deleted, T type changed; lines +/- (None: binary)."""

    path: str
    status: str
    plus: int | None = None
    minus: int | None = None


class HistoryEntry(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One checkpoint: taken before a call (``kind`` call) or before a rewind (``kind`` rescue). ``tree``
    None: no checkpoint could be taken (``note`` says why). ``files``: what changed from this checkpoint to
    the next one in the workspace (or to the workspace now, for the newest)."""

    id: int
    time: float
    workspace: str
    kind: str = "call"
    tree: str | None = None
    session: str = ""
    provider: str = ""
    tool: str = ""
    summary: str = ""
    agent_pid: int | None = None
    subagent_id: str | None = None
    writes: list[str] = []  # what the classification says the call writes (workspace-relative)
    bounded: bool = False  # True: the call can write only ``writes`` (file tools, known commands)
    note: str = ""
    took_ms: float | None = None
    files: list[FileChange] = []
    added: int = 0
    changed: int = 0
    deleted: int = 0
    plus: int = 0
    minus: int = 0
    until: int | None = None  # the checkpoint ``files`` runs to; None: the workspace now


class HistoryReply(_Msg):
    entries: list[HistoryEntry]
    diff: str | None = None  # History with id and diff: the unified diff
    truncated: bool = False
    ref: str | None = None


class RewindReply(_Msg):
    ok: bool
    detail: str
    changes: list[list[str]] = []  # [action, path]: create, restore, mode, delete
    conflicts: list[str] = []  # paths changed after the call by someone else (refused without force)
    errors: list[str] = []  # paths that could not be restored
    rescue: int | None = None  # the checkpoint taken before this rewind (rewind it to undo the rewind)
    ref: str | None = None


ServerMessage = (
    Welcome
    | Pending
    | Decision
    | Snapshot
    | Prompt
    | Resolved
    | Ack
    | Error
    | StatusReply
    | CheckResult
    | RulesReply
    | ProbeReply
    | SandboxPlanReply
    | AuditReply
    | GrantsReply
    | PolicyNotice
    | SandboxNotice
    | Bye
    | Pong
    | HistoryReply
    | RewindReply
    | Held
    | RuleCheckReply
)

# Encoders/decoders are module-level: building them is the costly part, using them is cheap.
_encoder = msgspec.json.Encoder()
client_decoder: msgspec.json.Decoder[ClientMessage] = msgspec.json.Decoder(ClientMessage)
server_decoder: msgspec.json.Decoder[ServerMessage] = msgspec.json.Decoder(ServerMessage)


def encode(msg: msgspec.Struct) -> bytes:
    """One wire line, newline included."""
    return _encoder.encode(msg) + b"\n"


# How deep a message may nest (objects and arrays, the message itself included). A tool input nested ~1,000
# deep made the decoder raise RecursionError (no reply, a traceback per connection); everything downstream
# that walks an input (summaries, the classifier, the audit encoder) is bounded by this too.
MAX_DEPTH = 64
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS_ONLY = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting_depth(line: bytes) -> int:
    """The deepest nesting of objects and arrays in one JSON line, brackets inside strings not counted.

    C-speed passes only (regex, translate, accumulate): about 50 ns per bracket, so a 1 MiB line of
    brackets costs tens of milliseconds."""
    brackets = _JSON_STRING.sub(b"", line).translate(None, _BRACKETS_ONLY)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(line: bytes) -> bool:
    """Whether ``line`` nests deeper than ``MAX_DEPTH``; an ordinary line (few brackets) is not scanned."""
    return line.count(b"[") + line.count(b"{") > MAX_DEPTH and nesting_depth(line) > MAX_DEPTH


def decode_client(line: bytes) -> ClientMessage:
    """Raises msgspec.DecodeError / ValidationError, or UnicodeDecodeError-free: msgspec checks UTF-8.

    A message nested deeper than ``MAX_DEPTH`` is a ValidationError (an ``invalid_message`` reply), never a
    RecursionError."""
    if too_deep(line):
        raise msgspec.ValidationError(f"message nested deeper than {MAX_DEPTH} levels")
    try:
        return client_decoder.decode(line)
    except RecursionError:  # cannot happen below MAX_DEPTH; kept so a deep stack still gets a reply
        raise msgspec.ValidationError(f"message nested deeper than {MAX_DEPTH} levels") from None


def decode_server(line: bytes) -> ServerMessage:
    return server_decoder.decode(line)
