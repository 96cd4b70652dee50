"""The decision function: the five-tier model's decision order (deny rules win; then hooks, ask rules, allow
rules, the mode, escalation, a final deny), made complete with our own steps, over plain data.

``evaluate(call, policy, session, cls, ctx, ...)`` is pure: the classification (what the call really
does) and the answers of hooks and auto mode's classifier are arguments. When hooks or the classifier
must be consulted and their answers are not given yet, the result says so (``Evaluation.need``); the
gate (``nexusd.policy.gate``) runs them and calls again. Re-running the cheap early steps is simpler
and safer than resuming half-way.

Order: (1) deny rules, (2) hooks, (3) ask rules, (4) safety checks, (4a) locked policy, (4b) folder trust,
(5) allow rules, then mode sufficiency, then auto mode's classifier, (6) escalation, (7) final deny. Every
step that ran is in the verdict's trace; every ask passes through one funnel that turns it into a deny where
the mode cannot ask (dontAsk; plan for writes).
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from nexusd.core.classify import details as classify_details
from nexusd.core.classify.commands import SAFE_DEVICES, meaning_spellings
from nexusd.core.classify.paths import SECRET_KINDS, is_credential, is_protected, reaches_elsewhere
from nexusd.core.model import (
    NOT_AUTO_ALLOWABLE,
    NOT_RULE_ALLOWABLE,
    Classification,
    Command,
    Context,
    Flag,
    Requirement,
    Session,
    ToolKind,
)
from nexusd.core.netpolicy import DomainPattern, Target, canonical_ip, parse_pattern
from nexusd.core.policy.modes import INTERNAL, ModeSpec, resolve
from nexusd.core.policy.policy import HookSpec, Policy
from nexusd.core.policy.rules import Rule, RuleError, argv_texts, parse_rule
from nexusd.core.policy.suggest import blanket_reason, code_blanket_reason, suggest
from nexusd.core.tools import ACTS_ON_NOTHING, PATH_KEYS, READ_REDIRECTS, WRITE_REDIRECTS, tool_info
from nexusd.protocol import CallInfo, TraceStep, Verdict

__all__ = [
    "SAFETY_ASK",
    "SECRET_FLAG",
    "ClassifierAnswer",
    "Evaluation",
    "HookAnswer",
    "Policy",
    "effective_mode",
    "evaluate",
]

# Need a person in every mode, bypass included, and can never be learned.
SAFETY_ASK = frozenset({Flag.PROTECTED_PATH, Flag.CATASTROPHIC, Flag.UNPARSEABLE, Flag.DYNAMIC, Flag.GATE_CONTROL})
# Refused in every mode (reads and writes over 10 MB: a person cannot review such a call; the audit trail,
# the one record of what agents did, is never theirs to write; cloud metadata services hand out credentials).
SAFETY_DENY = frozenset({Flag.LARGE_WRITE, Flag.LARGE_READ, Flag.AUDIT_TRAIL, Flag.METADATA_ADDRESS})
# Surfaced in the reason of an allow (the model and the audit trail see it), not refused.
_SURFACED = frozenset({Flag.BINARY_READ})
UNTRUSTED_FLAG = "untrusted_workspace"
# a shell call's ask that only a secret read kept from the mode: the sandbox, which hides the secret, may run it
# (``nexusd.policy.shaping.sandbox_auto_allow``); any other way it needs a person
SECRET_FLAG = "secret_unless_sandboxed"
# an ask rule with require_human matched: only a person answering this very call may allow it
HUMAN_FLAG = "require_human"


@dataclass(frozen=True, slots=True)
class HookAnswer:
    hook: HookSpec
    decision: Literal["allow", "ask", "deny"]
    reason: str = ""
    error: str | None = None  # set when the decision is the hook's on_error


@dataclass(frozen=True, slots=True)
class ClassifierAnswer:
    decision: Literal["allow", "deny", "error"]
    reason: str = ""


@dataclass(slots=True)
class Evaluation:
    """A verdict, or what the gate must run first (then call ``evaluate`` again with the answers)."""

    verdict: Verdict | None = None
    need: Literal["hooks", "classifier"] | None = None
    hooks: tuple[HookSpec, ...] = ()
    classifier_outcome: Literal["allow", "deny"] | None = None  # for Session.classifier_denials


@dataclass(slots=True)
class _Run:
    call: CallInfo
    cls: Classification
    ctx: Context
    policy: Policy
    mode: ModeSpec
    trace: list[TraceStep] = field(default_factory=list)
    explain: bool = True  # False: no trace, details only where the daemon needs them (see evaluate)
    why_not_mode: str = ""  # set when a setting, not the mode's ceiling, kept the mode from allowing
    spelled: list[tuple[tuple[str, ...] | None, bool]] | None = None  # _deny_spellings of cls.commands, once needed
    secret: str | None = None  # what secret the call reads (the sandbox hides it): no mode allows it by itself
    secret_only: bool = False  # ... and the mode would have allowed the call but for it

    def step(self, step: str, outcome: str, detail: str = "") -> None:
        if self.explain:
            self.trace.append(TraceStep(step, outcome, detail))


# ---------------------------------------------------------------------- mode


def effective_mode(session: Session, policy: Policy, provider: str | None = None) -> tuple[ModeSpec, str]:
    """The session's mode: a person's override, else the agent's, else the policy's default; clamped.
    A function of the policy and these four strings: kept with the policy (every call asks)."""
    key = ("mode", provider, session.provider, session.override_mode, session.agent_mode)
    return policy.derived(key, lambda: _effective_mode(session, policy, provider))


def _effective_mode(session: Session, policy: Policy, provider: str | None) -> tuple[ModeSpec, str]:
    prov = policy.provider(provider or session.provider)
    if session.override_mode:
        raw, why = session.override_mode, "set by a person"
    elif session.agent_mode:
        raw, why = session.agent_mode, f"reported by {session.provider}"
    else:
        raw, why = prov.default_mode or policy.default_mode or "default", "policy default"
    spec = resolve(raw)
    notes = [f"{raw!r} ({why}) -> {spec.name if spec else 'unknown'}"]
    if spec is None:
        spec = INTERNAL["default"]
        notes.append("unknown mode: using default")
    for allowed, who in ((policy.allowed_modes, "managed policy"), (prov.allowed_modes, f"provider {provider}")):
        if allowed is not None and spec.name not in allowed and spec.name != "default":
            notes.append(f"{spec.name} not permitted by {who}: using default")
            spec = INTERNAL["default"]
    if spec.bypass and policy.disable_bypass:
        notes.append(f"bypass disabled by disable_bypass ({policy.disable_bypass_origin or 'policy'}): using default")
        spec = INTERNAL["default"]
    return spec, "; ".join(notes)


def _mode_words(run: _Run) -> str:
    """The mode as the agent's user knows it, for reasons the agent shows: the spelling the agent reported
    when that is the mode in force (``mode dontAsk``), Codex's as its approval policy (Codex has no modes:
    ``approval policy "never"``); else nexusd's name (set by a person or the policy's default)."""
    said = run.call.mode
    if said and resolve(said) is run.mode:
        if run.call.provider == "codex":
            return f'approval policy "{said}"'
        return f"mode {said}"
    return f"mode {run.mode.name}"


# ---------------------------------------------------------------------- paths


def _inside(path: str, roots: Sequence[str]) -> bool:
    """``path`` is a root or below one (without building ``root + "/"`` for every path and root)."""
    for r in roots:
        if r.endswith("/"):
            if path == r or path.startswith(r.rstrip("/") + "/"):
                return True
        elif path.startswith(r) and (len(path) == len(r) or path[len(r)] == "/"):
            return True
    return False


def _all_inside(paths: Sequence[str], roots: Sequence[str]) -> bool:
    for p in paths:  # noqa: SIM110 - a loop, not all() over a generator: every call's paths come here
        if not _inside(p, roots):
            return False
    return True


def _abs(p: str, ctx: Context) -> str:
    if p == "~" or p.startswith("~/"):
        p = ctx.home + p[1:]
    if p.startswith("/"):  # what join(cwd, p) gives for an absolute p, without the join
        return posixpath.normpath(p)
    return posixpath.normpath(posixpath.join(ctx.cwd, p))


def _file_paths(call: CallInfo, cls: Classification, ctx: Context) -> tuple[list[str], list[str]]:
    """Paths read and written, canonical ones plus the lexical path a file tool named (the link itself)."""
    reads, writes = list(cls.reads), list(cls.writes)
    if cls.redirects:  # sets for the membership tests: a list's made 5,000 redirects quadratic
        read_set, write_set = set(reads), set(writes)
        for r in cls.redirects:
            if not _redirect_file(r.target):
                continue
            p = _abs(r.target, ctx)  # type: ignore[arg-type]
            if r.op in WRITE_REDIRECTS and p not in write_set:
                write_set.add(p)
                writes.append(p)
            if r.op in READ_REDIRECTS and p not in read_set:
                read_set.add(p)
                reads.append(p)
    inp = call.input
    if cls.kind != ToolKind.SHELL and isinstance(inp, dict) and not _PATH_KEY_SET.isdisjoint(inp):
        edit = cls.kind == ToolKind.EDIT
        target = writes if edit else reads
        shows = edit and cls.tool in _EDITS_THAT_SHOW
        for key in PATH_KEYS:  # in this order, whatever the input's
            v = inp.get(key)
            if isinstance(v, str) and v and "\x00" not in v:
                p = _abs(v, ctx)
                if p not in target:
                    target.append(p)
                # an edit tool shows the lines around its change (Claude's Edit prints a snippet of the
                # file): Read deny rules see it as the read it is
                if shows and p not in reads:
                    reads.append(p)
    return reads, writes


_PATH_KEY_SET = frozenset(PATH_KEYS)


_EDITS_THAT_SHOW = frozenset({"Edit", "MultiEdit", "NotebookEdit"})


def _redirect_file(target: str | None) -> bool:
    """Whether a redirect target is a file (not a descriptor, a heredoc, or a harmless device)."""
    if target is None or target.isdigit() or target == "-" or target.endswith("-"):
        return False
    return target not in SAFE_DEVICES and not target.startswith(("/dev/fd/", "/dev/pts/"))


def _redirect_writes(cls: Classification, ctx: Context) -> list[str]:
    return [
        _abs(r.target, ctx)
        for r in cls.redirects
        if r.target is not None and r.op in WRITE_REDIRECTS and _redirect_file(r.target)
    ]


# ---------------------------------------------------------------------- rule matching


# Variables that only tune output, locale or test runners: in front of a command they do not change
# which program runs or what it loads, so a Bash allow rule still covers ``CI=1 npm test``. Any other
# assignment is part of what runs (``FOO=bar npm test`` under ``Bash(npm test:*)`` is asked, as peers do).
HARMLESS_ENV = frozenset(
    {
        "CI",
        "NODE_ENV",
        "RAILS_ENV",
        "RACK_ENV",
        "APP_ENV",
        "DEBUG",
        "VERBOSE",
        "LOG_LEVEL",
        "RUST_LOG",
        "RUST_BACKTRACE",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "TERM",
        "COLUMNS",
        "LINES",
        "LANG",
        "LANGUAGE",
        "TZ",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "CGO_ENABLED",
        "GOOS",
        "GOARCH",
        "NODE_NO_WARNINGS",
        "TIMEFORMAT",
    }
)  # not PYTHONWARNINGS: ``error::mod.Cls`` imports mod


def _env_neutral(c: Command) -> bool:
    return not c.env or all(k in HARMLESS_ENV or k.startswith("LC_") for k, _ in c.env)


_SHELL_SEPARATORS = re.compile(r"[;&|()\n`{}]+|\$\(")
_SPACE = re.compile(r"\s")
_OPTION_HEAD = re.compile(r"^(?:[^=\s]*=|[:+!@]+)+")


def _opaque_views(argv: tuple[str, ...], stdin: str = "") -> Iterator[tuple[str, ...]]:
    """What an opaque program may run: every tail of its argv, and every command-like piece of a word
    that may be shell source (``zpty w 'curl x'``, ``setsid -f bash -c 'curl x; y'``) or of the literal
    text it reads on standard input."""
    for i in range(1, len(argv)):
        yield argv[i:]
    for word in (*argv[1:], stdin):
        if _SPACE.search(word) is None:  # \s is str.isspace: one word, nothing more to split
            continue
        for piece in _SHELL_SEPARATORS.split(word):
            words = tuple(w.strip("'\"") for w in piece.split())
            for i in range(len(words)):
                yield words[i:]
                # a command inside a setting or an editor command: ProxyCommand=curl x, :!curl x, +!curl
                head = _OPTION_HEAD.sub("", words[i])
                if head and head != words[i]:
                    yield (head.strip("'\""), *words[i + 1 :])


# Characters of an opaque command's view spellings kept per decision; beyond that (a huge argv or input,
# whose views grow quadratically) each rule walks the views itself, as a stream.
_SPELLED_MAX = 1 << 18


def _deny_spellings(c: Command) -> tuple[tuple[str, ...] | None, bool]:
    """Every spelling deny/ask rules match a command against, computed once per command and decision and
    shared by all those rules: its argv (``argv_texts``) and, for an opaque program, every view of what it
    may run (``_opaque_views``). Returns (spellings or None for a forged word, which every such rule
    matches; whether the views were too large to keep, so that each rule must walk them)."""
    argv = c.argv
    texts = argv_texts(argv, exact=False)
    if texts is None:
        return None, False
    if argv:
        # case-insensitive file systems (macOS) run CURL as curl, and WSL runs curl.exe: deny and ask rules
        # match those spellings of the program name too
        name = argv[0].lower().removesuffix(".exe")
        if name != argv[0]:
            more = argv_texts((name, *argv[1:]), exact=False)
            if more is None:
                return None, False
            texts += more
        # what the command does, in the spellings a deny rule may use (rm -fr under Bash(rm -rf *), git push
        # origin +main under Bash(git push --force *))
        for view in (*c.respelled, *meaning_spellings(argv), *(v for r in c.respelled for v in meaning_spellings(r))):
            more = argv_texts(view, exact=False)
            if more is None:
                return None, False
            texts += more
    if not c.opaque:
        return texts, False
    spelled = list(texts)
    size = 0
    for view in _opaque_views(argv, c.stdin):
        more = argv_texts(view, exact=False)
        if more is None:
            return None, False
        size += len(more[0]) * len(more)
        if size > _SPELLED_MAX:
            return texts, True
        spelled += more
    return tuple(spelled), False


def _deny_hit(rule: Rule, run: _Run, reads: list[str], writes: list[str]) -> str | None:
    """What a deny/ask rule matched in this call, or None. Any one match is enough."""
    cls, ctx = run.cls, run.ctx
    if rule.family == "shell":
        if cls.kind != ToolKind.SHELL:
            return None
        if rule.bare:
            return "the shell tool"
        spelled = run.spelled
        if spelled is None:
            spelled = run.spelled = [_deny_spellings(c) for c in cls.commands]
        for c, (texts, stream) in zip(cls.commands, spelled, strict=True):
            # the command, or anything an opaque one may run (see ``_opaque_views``)
            if rule.matches_texts(texts) or (
                stream and any(rule.matches_argv(v) for v in _opaque_views(c.argv, c.stdin))
            ):
                return "sub-command " + " ".join(c.argv)
        return None
    if rule.family in ("read", "edit") and not rule.bare:
        paths = reads if rule.family == "read" else writes
        if rule.family == "edit" and rule.tool != "Edit" and not rule.covers_call(cls):
            return None
        for p in paths:
            head, _, base = p.rpartition("/")
            # a case-insensitive file system (macOS) opens .ENV as .env: deny and ask rules see that spelling
            if rule.matches_path(p, ctx.cwd, ctx.home) or (
                base != base.lower() and rule.matches_path(f"{head}/{base.lower()}", ctx.cwd, ctx.home)
            ):
                return ("file read " if rule.family == "read" else "file written ") + p
        if rule.family == "read":
            for d in cls.recursive_reads:  # grep -r, rg, find: every file below the directory is read
                if rule.path is None or rule.path.may_match_below(d, ctx.cwd, ctx.home):
                    return "files read below " + d
        return None
    if not rule.covers_call(cls):
        return None
    if rule.family == "fetch":
        return f"domain {cls.domain}" if rule.matches_domain(cls.domain) else None
    return f"tool {cls.tool}"


def _denied_host(policy: Policy, hosts: Sequence[str]) -> str | None:
    """Why one of ``hosts`` is a denied domain of ``[sandbox.network]`` (the proxy's own matcher), or None."""
    denied: tuple[DomainPattern, ...] = policy.derived(("denied_domains",), lambda: _patterns(policy.denied_domains))
    for host in hosts:
        target = Target(host, 443, _is_ip(host))
        for pat in denied:
            if pat.matches(target):
                return f"{host} is a denied domain ({pat.text}, [sandbox.network] denied_domains)"
    return None


def _patterns(entries: Sequence[str]) -> tuple[DomainPattern, ...]:
    out: list[DomainPattern] = []
    for e in entries:
        try:
            out.append(parse_pattern(e))
        except ValueError:  # validated at load; an entry that cannot parse still refuses its own spelling
            wild = e.startswith("*.")
            out.append(DomainPattern(e, e[2 if wild else 0 :].lower().strip("."), wild, False))
    return tuple(out)


def _is_ip(host: str) -> bool:
    return canonical_ip(host) is not None


def _may_apply(rule: Rule, cls: Classification) -> bool:
    """Whether a deny/ask rule can match some call of this kind and tool (``_deny_hit`` answers None for
    the others): Read and Edit path rules see every call's paths; any other rule only the calls it covers,
    a function of ``cls.kind`` and ``cls.tool`` alone."""
    if rule.family == "read" and not rule.bare:
        return True
    if rule.family == "edit" and not rule.bare and rule.tool == "Edit":
        return True
    return rule.covers_call(cls)


def _relevant(policy: Policy, cls: Classification) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """The policy's deny and ask rules that may match a call of this kind and tool, in order: kept per
    policy, so a call does not walk the rules that cannot concern it (a Read call and ``Bash(curl *)``)."""
    return policy.derived(
        ("relevant", cls.kind, cls.tool),
        lambda: (
            tuple(r for r in policy.of_kind("deny") if _may_apply(r, cls)),
            tuple(r for r in policy.of_kind("ask") if _may_apply(r, cls)),
        ),
    )


def _covered_outside(paths: Sequence[str], family: str, allows: Sequence[Rule], ctx: Context) -> list[Rule] | None:
    """Rules covering every path outside the workspace (None: some path is not covered)."""
    used: list[Rule] = []
    for p in paths:
        if _inside(p, ctx.workspace_roots):
            continue
        hit = next(
            (r for r in allows if r.family == family and not r.bare and r.matches_path(p, ctx.cwd, ctx.home)), None
        )
        if hit is None:
            return None
        if hit not in used:
            used.append(hit)
    return used


def _allow_match(
    allows: Sequence[Rule], cls: Classification, reads: list[str], writes: list[str], ctx: Context
) -> tuple[list[Rule], list[Command]]:
    """The allow rules that together allow the call (empty: not allowed) and the uncovered sub-commands."""
    if cls.kind == ToolKind.SHELL:
        if not cls.commands:
            return [], []
        used: list[Rule] = []
        uncovered: list[Command] = []
        shell = [r for r in allows if r.family == "shell"]
        for c in cls.commands:
            hit = None
            if _env_neutral(c):
                texts = argv_texts(c.argv, exact=True)  # spelled once for every allow rule
                for r in shell:
                    if r.matches_texts(texts):
                        hit = r
                        break
            if hit is None:
                uncovered.append(c)
            elif hit not in used:
                used.append(hit)
        if uncovered:
            return [], uncovered
        # A Bash rule allows the commands, not the files their redirects write (Claude Code and Gemini CLI
        # agree: `Bash(echo *)` does not cover `echo x > notes.txt`); those need an Edit rule or the mode.
        edits = [r for r in allows if r.family == "edit" and not r.bare]
        redirect_rules: list[Rule] = []
        for p in _redirect_writes(cls, ctx):
            hit = next((r for r in edits if r.matches_path(p, ctx.cwd, ctx.home)), None)
            if hit is None:
                return [], []
            if hit not in redirect_rules:
                redirect_rules.append(hit)
        used += [r for r in redirect_rules if r not in used]
        # Files outside the workspace need Read/Edit rules of their own.
        r_out = _covered_outside(reads, "read", allows, ctx)
        w_out = _covered_outside(writes, "edit", allows, ctx)
        if r_out is None or w_out is None:
            return [], []
        if Flag.OUTSIDE_WORKSPACE in cls.flags and not any(
            not _inside(p, ctx.workspace_roots) for p in (*reads, *writes)
        ):
            return [], []  # the classifier saw an outside path it could not name: no rule can cover it
        return used + [r for r in (*r_out, *w_out) if r not in used], []
    for rule in allows:
        if rule.family == "shell" or not rule.covers_call(cls):  # a shell rule covers only shell calls
            continue
        if rule.family in ("read", "edit") and not rule.bare:
            paths = reads if rule.family == "read" else writes
            if not paths or not all(rule.matches_path(p, ctx.cwd, ctx.home) for p in paths):
                continue
            # an edit tool that also reads (MultiEdit) needs its writes covered; reads follow the writes
        elif rule.family == "fetch" and not rule.matches_domain(cls.domain):
            continue
        return [rule], []
    return [], []


# ---------------------------------------------------------------------- verdicts


def _origin(rules: Sequence[Rule]) -> tuple[str | None, str | None]:
    if not rules:
        return None, None
    return "; ".join(r.text for r in rules), "; ".join(dict.fromkeys(r.origin for r in rules))


def _verdict(
    run: _Run,
    decision: str,
    reason: str,
    source: str,
    *,
    rules: Sequence[Rule] = (),
    suggestions: Sequence[str] = (),
    extra_flags: Sequence[str] = (),
) -> Verdict:
    rule, origin = _origin(rules) if rules else (None, None)
    cls_flags = run.cls.flags
    if cls_flags:  # most calls raise no flag: skip the sort and the set work
        if decision == "allow" and cls_flags & _SURFACED:
            reason += "; note: " + "; ".join(n for n in run.cls.notes if "binary" in n)
        flags = sorted(str(f) for f in cls_flags)
    else:
        flags = []
    if extra_flags:
        flags.extend(f for f in extra_flags if f not in flags)
    return Verdict(
        decision=decision,  # type: ignore[arg-type]
        reason=reason,
        source=source,  # type: ignore[arg-type]
        rule=rule,
        rule_origin=origin,
        requirement=run.cls.requirement.label,
        tier=_tier(run.call.tool, run.call.provider),
        flags=flags,
        suggestions=list(suggestions) if decision == "ask" else [],
        trace=list(run.trace),
        # the daemon needs the kind of an allowed call (sandbox wrapping); people need all of it
        details=classify_details(run.cls) if run.explain or decision == "allow" else None,
    )


@functools.lru_cache(maxsize=1024)
def _catalogue_tier(tool: str, provider: str) -> str:
    return tool_info(tool, provider).tier


def _tier(tool: str, provider: str) -> str:
    """The tool's tier in the catalogue (pure): remembered for the tool names agents use, not for any
    string a client may send (a long one is looked up each time)."""
    return _catalogue_tier(tool, provider) if len(tool) + len(provider) <= 160 else tool_info(tool, provider).tier


def _runs_or_writes(cls: Classification, writes: Sequence[str]) -> bool:
    return (
        bool(writes)
        or cls.kind == ToolKind.EDIT
        or (cls.kind == ToolKind.SHELL and cls.requirement > Requirement.READ_ONLY)
    )


def _ask(
    run: _Run,
    writes: Sequence[str],
    reason: str,
    source: str,
    *,
    step: str,
    rules: Sequence[Rule] = (),
    suggestions: Sequence[str] = (),
    extra_flags: Sequence[str] = (),
) -> Verdict:
    """Every ask goes through here: where the mode cannot ask, it becomes a deny."""
    if not run.mode.prompts:
        run.step("escalation", "deny", f"{run.mode.name} never asks")
        return _verdict(
            run,
            "deny",
            f"{reason}; under {_mode_words(run)} nexusd cannot ask, so it denied this",
            source,
            rules=rules,
            extra_flags=extra_flags,
        )
    if run.mode.deny_writes and _runs_or_writes(run.cls, writes):
        run.step("escalation", "deny", "plan mode: writes and commands are denied")
        return _verdict(
            run,
            "deny",
            f"{reason}; plan mode does not write or run commands, so denied",
            source,
            rules=rules,
            extra_flags=extra_flags,
        )
    run.step("escalation", "ask", step)
    return _verdict(run, "ask", reason, source, rules=rules, suggestions=suggestions, extra_flags=extra_flags)


def _human_rule(run: _Run, reads: list[str], writes: list[str]) -> Rule | None:
    """The first require_human ask rule that matches the call, if any."""
    for rule in run.policy.of_kind("ask"):
        if rule.human and _deny_hit(rule, run, reads, writes):
            return rule
    return None


def _session_rules(session: Session, kind: str, run: _Run) -> list[Rule]:
    out: list[Rule] = []
    texts = session.allow_rules if kind == "allow" else session.deny_rules
    for t in texts:
        got = _parsed(run.policy, t, kind, "session", f"session:{session.id}")
        if isinstance(got, Rule):
            out.append(got)
        else:
            run.step(f"{kind}_rules", "error", f"session rule ignored: {got}")
    for k, t, gid in session.grant_rules:
        if k != kind:
            continue
        got = _parsed(run.policy, t, kind, "grant", f"grant:{gid}")
        if isinstance(got, Rule):
            out.append(got)
        else:
            run.step(f"{kind}_rules", "error", f"grant {gid} ignored: {got}")
    return out


def _parsed(policy: Policy, text: str, kind: str, layer: str, origin: str) -> Rule | RuleError:
    """A session rule or grant, parsed once per policy (every call of the session asks for it again)."""

    def parse() -> Rule | RuleError:
        try:
            return parse_rule(text, kind, layer=layer, origin=origin)  # type: ignore[arg-type]
        except RuleError as e:
            return e

    return policy.derived(("rule", kind, layer, origin, text), parse)


# ---------------------------------------------------------------------- evaluate


def evaluate(  # noqa: C901 - the decision's ordered steps
    call: CallInfo,
    policy: Policy,
    session: Session,
    cls: Classification,
    ctx: Context,
    *,
    hooks: Sequence[HookAnswer] | None = None,
    classifier: ClassifierAnswer | None = None,
    dry_run: bool = False,
    explain: bool = True,
) -> Evaluation:
    """Decide one call. Pure; see the module docstring for the order and for ``Evaluation.need``.

    ``explain=False`` decides identically but skips what only people read: no trace, and ``details``
    only on an allow. Callers that show an ask to a person (or a check) must evaluate with
    ``explain=True``; the gate re-evaluates an ask that way (pure, so the verdict is the same).
    """
    mode, mode_note = effective_mode(session, policy, call.provider)
    run = _Run(call, cls, ctx, policy, mode, explain=explain)
    # the steps every call passes are appended here directly (one method call fewer each, on every call)
    trace = run.trace if explain else None
    if trace is not None:
        trace.append(TraceStep("mode", mode.name, mode_note))
    reads, writes = _file_paths(call, cls, ctx)

    # (1) deny rules: every layer, every sub-command, every file read or written; wins in every mode.
    denies, asks = _relevant(policy, cls)
    if session.deny_rules or session.grant_rules:
        denies = (*denies, *_session_rules(session, "deny", run))
    for rule in denies:
        hit = _deny_hit(rule, run, reads, writes)
        if hit:
            run.step("deny_rules", "matched", f"{rule.text} ({rule.origin}) matched {hit}")
            return Evaluation(_verdict(run, "deny", f"denied by rule {rule.text}: {hit}", "rule", rules=[rule]))
    # (1') the sandbox's denied domains: refused for every tool that names them (WebFetch, curl, an MCP fetch),
    # in every mode, whether or not the call runs sandboxed
    if policy.denied_domains and cls.hosts:
        refused = _denied_host(policy, cls.hosts)
        if refused is not None:
            run.step("deny_rules", "matched", refused)
            return Evaluation(_verdict(run, "deny", f"refused: {refused}", "rule"))
    if trace is not None:
        trace.append(TraceStep("deny_rules", "passed"))

    # (2) hooks: deny is final, ask forces a prompt, allow continues.
    applicable = tuple(h for h in policy.hooks if h.applies(cls)) if policy.hooks else ()
    if applicable:
        if dry_run and hooks is None:
            run.step("hooks", "skipped", f"{len(applicable)} hook(s) not run in a check")
        elif hooks is None:
            return Evaluation(need="hooks", hooks=applicable)
        else:
            forced: HookAnswer | None = None
            for a in hooks:
                detail = f"{' '.join(a.hook.command)} ({a.hook.origin}): {a.decision}"
                if a.error:
                    detail += f" (on_error after: {a.error})"
                if a.reason:
                    detail += f": {a.reason}"
                if a.decision not in ("allow", "ask", "deny"):
                    a = HookAnswer(a.hook, "deny", a.reason, a.error or f"invalid decision {a.decision!r}")
                run.step("hooks", a.decision, detail)
                if a.decision == "deny":
                    why = a.reason or a.error or "no reason given"
                    return Evaluation(_verdict(run, "deny", f"denied by hook {a.hook.command[0]}: {why}", "hook"))
                if a.decision == "ask" and forced is None:
                    forced = a
            if forced is not None:
                reason = f"hook {forced.hook.command[0]} asks for a person: {forced.reason or forced.error or ''}"
                human = _human_rule(run, reads, writes)
                if human is not None:
                    run.step("ask_rules", "matched", f"{human.text} ({human.origin}) requires a person")
                return Evaluation(
                    _ask(
                        run,
                        writes,
                        reason.rstrip(": "),
                        "hook",
                        step="hook asked",
                        extra_flags=[HUMAN_FLAG] if human is not None else [],
                    )
                )
    else:
        if trace is not None:
            trace.append(TraceStep("hooks", "skipped", "no hook applies"))

    # (3) ask rules: a prompt regardless of mode (bypass included). One with require_human wins over the others:
    # its flag tells the daemon that nothing but a person's answer to this call may allow it.
    asked: tuple[Rule, str] | None = None
    for rule in asks:
        hit = _deny_hit(rule, run, reads, writes)
        if hit and (asked is None or (rule.human and not asked[0].human)):
            asked = (rule, hit)
            if rule.human:
                break
    if asked is not None:
        rule, hit = asked
        only = " (require_human: only a person answering this call)" if rule.human else ""
        run.step("ask_rules", "matched", f"{rule.text} ({rule.origin}) matched {hit}{only}")
        return Evaluation(
            _ask(
                run,
                writes,
                f"rule {rule.text} asks: {hit}{only}",
                "rule",
                step="ask rule",
                rules=[rule],
                extra_flags=[HUMAN_FLAG] if rule.human else [],
            )
        )
    if trace is not None:
        trace.append(TraceStep("ask_rules", "passed"))

    # (4) safety checks: a person in every mode, never learnable.
    deny_flags = cls.flags & SAFETY_DENY
    if deny_flags:
        notes = "; ".join(cls.notes) or ", ".join(sorted(deny_flags))
        run.step("safety", "deny", notes)
        return Evaluation(_verdict(run, "deny", f"refused by a safety check: {notes}", "safety"))
    ask_flags = cls.flags & SAFETY_ASK
    if ask_flags:
        notes = "; ".join(cls.notes) or ", ".join(sorted(ask_flags))
        if Flag.DYNAMIC in ask_flags and cls.kind == ToolKind.SHELL:
            # what it reads is known only when it runs: say plainly that a click may approve what a deny
            # rule forbids, and which rules those are
            covered = [r.text for r in denies if r.family in ("read", "edit") and not r.bare][:3]
            if covered:
                notes += (
                    "; WARNING: which files it reads or writes is known only when it runs, so it may read a "
                    f"file a deny rule covers ({', '.join(covered)})"
                )
        run.step("safety", "ask", f"{', '.join(sorted(ask_flags))}: {notes}")
        return Evaluation(_ask(run, writes, f"needs a person (safety check): {notes}", "safety", step="safety"))
    if trace is not None:
        trace.append(TraceStep("safety", "passed"))

    # (4a) locked: a policy layer could not be read and has no last good copy, so its deny rules are unknown:
    # nothing is allowed by a rule, a mode, the classifier or a grant; a person still decides every ask.
    if policy.locked:
        run.step("locked", "ask", policy.locked)
        return Evaluation(
            _ask(run, writes, f"nexusd is locked, so a person decides: {policy.locked}", "safety", step="locked")
        )

    # (4b) folder trust: an unknown workspace with a project policy asks a person to trust it.
    trusted = policy.trust == "trusted"
    if policy.trust == "unknown" and policy.workspace:
        run.step("trust", "ask", f"{policy.workspace} has a project policy and is not trusted yet")
        sugg = [f"Trust({policy.workspace})", *suggest(cls, ctx.workspace_roots)]
        question = f"workspace {policy.workspace} has a project policy; trust it (its allow rules then apply)?"
        if policy.sandbox_ignored:
            question += (
                " Trusted or not, a project only narrows the sandbox; these lines of it would loosen it and do NOT"
                " apply (say them in your own policy to use them): " + "; ".join(policy.sandbox_ignored)
            )
        return Evaluation(
            _ask(
                run,
                writes,
                question,
                "safety",
                step="trust",
                suggestions=sugg,
                extra_flags=[UNTRUSTED_FLAG],
            )
        )
    if policy.trust == "untrusted":
        run.step("trust", "untrusted", "project allow rules, hooks and settings ignored")
    if policy.trust == "new" and policy.workspace:
        # A new session where nobody has trusted or distrusted: "should this session exist here" is asked
        # once per session and workspace, when a person can answer and the mode asks at all. Unasked or
        # unanswered, the workspace stays untrusted (a project policy it gets later is only restrictions).
        if policy.workspace in session.trust_asked or not session.person_reachable or not run.mode.prompts:
            run.step("trust", "untrusted", f"{policy.workspace} is not trusted (nobody said)")
        else:
            run.step("trust", "ask", f"a new session in {policy.workspace}, which nobody has trusted or distrusted")
            return Evaluation(
                _ask(
                    run,
                    writes,
                    f"agent session {session.id} ({call.provider}) works in {policy.workspace}, which you have not "
                    "trusted or distrusted: let it work here? Trust it (always) or distrust it (never) for its "
                    "later sessions; a project policy there applies only in a trusted workspace",
                    "safety",
                    step="trust",
                    suggestions=[f"Trust({policy.workspace})", *suggest(cls, ctx.workspace_roots)],
                    extra_flags=[UNTRUSTED_FLAG],
                )
            )

    # (5) allow rules, then mode sufficiency. Never for a call that is not auto-allowable.
    uncovered: list[Command] | None = None
    if not cls.auto_allowable:
        bad = sorted(str(f) for f in cls.flags & NOT_AUTO_ALLOWABLE)
        run.step("allow_rules", "skipped", "not auto-allowable: " + ", ".join(bad))
        run.step("mode_check", "skipped", "not auto-allowable")
    else:
        used: list[Rule] = []
        run.secret = _secret_read(run, reads)
        # a trusted project's allow rules never cover a read of what the sandbox hides: only the person's own
        project_ok = trusted and run.secret is None
        if cls.rule_allowable:
            allows, code_blankets = policy.derived(
                ("allow", "trusted" if project_ok else None),
                lambda: _split_code_blankets(r for r in policy.of_kind("allow") if project_ok or not r.project),
            )
            own = session.allow_rules or session.grant_rules
            if own:
                mine, blankets = _split_code_blankets(_session_rules(session, "allow", run))
                allows, code_blankets = (*allows, *mine), (*code_blankets, *blankets)
            broad: Sequence[Rule] = ()
            if mode.escalation == "classifier":
                policy_allows = allows
                allows, broad, stripped = (
                    _strip_broad(allows)
                    if own
                    else policy.derived(
                        ("allow-auto", "trusted" if project_ok else None), lambda: _strip_broad(policy_allows)
                    )
                )
                if stripped:
                    run.step("allow_rules", "stripped", stripped)
            used, uncovered = _allow_match(allows, cls, reads, writes, ctx)
            if not used and code_blankets and (aside := _allow_match(code_blankets, cls, reads, writes, ctx)[0]):
                blanket = code_blanket_reason(aside[0].text)
                run.step("allow_rules", "set aside", f"{aside[0].text} ({aside[0].origin}): {blanket}")
                run.why_not_mode = (
                    f"the allow rule {aside[0].text} is set aside in every mode ({blanket}): a rule never allows "
                    "running any code the model writes; allow the exact command instead"
                )
            if not used and broad and _allow_match(broad, cls, reads, writes, ctx)[0]:
                run.why_not_mode = (
                    f"auto mode sets aside the broad allow rule {broad[0].text} "
                    f"({_broad(broad[0].text)}); a reviewer or a person decides"
                )
        else:
            bad = sorted(str(f) for f in cls.flags & NOT_RULE_ALLOWABLE)
            run.step("allow_rules", "skipped", "no rule can cover it: " + ", ".join(bad))
        if used:
            run.step("allow_rules", "matched", "; ".join(f"{r.text} ({r.origin})" for r in used))
            return Evaluation(
                _verdict(
                    run,
                    "allow",
                    f"allowed by rule {used[0].text}"
                    if len(used) == 1
                    else "allowed by rules " + ", ".join(r.text for r in used),
                    "rule",
                    rules=used,
                )
            )
        elif cls.rule_allowable and trace is not None:
            trace.append(TraceStep("allow_rules", "passed", "no allow rule covers the call"))
        v = _mode_check(run, reads, writes)
        if v is not None:
            return Evaluation(v)
        # auto mode: the external classifier decides what the mode alone does not allow.
        if mode.escalation == "classifier" and run.secret is None:
            ev = _classifier_step(run, session, writes, classifier, dry_run, uncovered)
            if ev is not None:
                return ev

    # (6) escalation, (7) final deny.
    sugg = suggest(cls, ctx.workspace_roots, uncovered or None)
    need = cls.requirement.label
    if mode.escalation == "deny":
        run.step("final", "deny", f"mode {mode.name} does not reach {need}")
        return Evaluation(
            _verdict(
                run, "deny", f"{_mode_words(run)} does not allow {need}, and nexusd cannot ask under it", "default"
            )
        )
    reason = (
        f"{cls.tool} needs {need}; {_mode_words(run)} asks"
        if cls.auto_allowable
        else (f"{cls.tool} cannot be allowed automatically: {'; '.join(cls.notes) or 'flagged'}")
    )
    if run.why_not_mode and cls.auto_allowable:
        reason = f"{cls.tool} asks because {run.why_not_mode}"
    flags = [SECRET_FLAG] if run.secret_only and cls.kind == ToolKind.SHELL else []
    return Evaluation(_ask(run, writes, reason, "mode", step="mode escalation", suggestions=sugg, extra_flags=flags))


_broad = functools.lru_cache(maxsize=4096)(blanket_reason)  # pure, and rules are few and repeat
_code_blanket = functools.lru_cache(maxsize=4096)(code_blanket_reason)


def _split_code_blankets(rules: Iterable[Rule]) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(allow rules that may allow, those set aside in every mode): an allow rule over an interpreter, shell,
    package runner, eval-family command, sudo or ssh with any arguments never allows by itself (seed 002)."""
    kept: list[Rule] = []
    aside: list[Rule] = []
    for r in rules:
        (aside if _code_blanket(r.text) else kept).append(r)
    return tuple(kept), tuple(aside)


def _strip_broad(allows: Sequence[Rule]) -> tuple[tuple[Rule, ...], tuple[Rule, ...], str]:
    """Auto mode: a reviewer decides what the rules do not allow, so a rule that lets any code run without a
    look (``Bash(python:*)``, ``Bash(node *)``, ``Bash(*)`` ...) would bypass it; such rules are set aside
    while the mode is auto, named in the trace (the one "too broad" check: ``suggest.blanket_reason``).
    Returns (kept, set aside, the trace's detail naming them or ""): a function of the rules alone, kept per
    policy when they are the policy's."""
    kept: list[Rule] = []
    broad: list[Rule] = []
    for r in allows:
        (broad if _broad(r.text) else kept).append(r)
    detail = ""
    if broad:
        detail = "auto mode sets aside broad allow rules: " + "; ".join(
            f"{r.text} ({r.origin}: {_broad(r.text)})" for r in broad
        )
    return tuple(kept), tuple(broad), detail


_SECRET_NOTES = tuple(f"reads {kind}" for kind in SECRET_KINDS)


def _secret_read(run: _Run, reads: Sequence[str]) -> str | None:
    """What the sandbox hides that this call reads (``Flag.SECRET_READ``: credentials, .env files, the daemon's
    directories; or the policy's ``[sandbox.filesystem] deny_read``), or None."""
    if Flag.SECRET_READ in run.cls.flags:
        return next((n[6:] for n in run.cls.notes if n.startswith(_SECRET_NOTES)), "a secret")
    hidden = run.policy.sandbox_hidden
    if hidden:
        for p in reads:
            if _inside(p, hidden):
                return f"a path the sandbox's deny_read hides: {p}"
    return None


def _mode_check(run: _Run, reads: Sequence[str], writes: Sequence[str]) -> Verdict | None:
    """The mode's own allow, except for a read of what the sandbox hides: never by a mode alone, bypass
    included (a person decides; a shell call may still run sandboxed, where the secret is not there)."""
    if run.secret is None:
        return _mode_allows(run, reads, writes)
    explain, run.explain = run.explain, False
    try:
        run.secret_only = _mode_allows(run, reads, writes) is not None
    finally:
        run.explain = explain
    run.why_not_mode = f"it reads {run.secret}; no mode allows that by itself (the sandbox hides it)"
    run.step("mode_check", "passed", f"reads {run.secret}: a person decides")
    return None


def _mode_allows(run: _Run, reads: Sequence[str], writes: Sequence[str]) -> Verdict | None:
    cls, mode, policy = run.cls, run.mode, run.policy
    need = cls.requirement
    if (
        Flag.OUTSIDE_WORKSPACE in cls.flags
        or not _all_inside(reads, run.ctx.workspace_roots)
        or not _all_inside(writes, run.ctx.workspace_roots)
    ):
        need = Requirement.DANGER_FULL_ACCESS
    prov = policy.provider(run.call.provider)
    if prov.auto_approval is False:
        safe = (cls.kind == ToolKind.READ or cls.tool in ACTS_ON_NOTHING) and need <= Requirement.READ_ONLY
        if safe:
            run.step("mode_check", "allow", "a safe tool (provider without auto-approval)")
            return _verdict(run, "allow", f"{cls.tool} is a safe read inside the workspace", "mode")
        name = run.call.provider
        run.why_not_mode = (
            f"the {name} provider has no auto-approval ([providers.{name}] auto_approval = false"
            f"{', its default' if name == 'gemini' else ''}): only allow rules and file reads inside the workspace "
            f"pass without a person; add an allow rule, or set auto_approval = true to let the mode decide"
        )
        run.step("mode_check", "passed", f"provider {name} has no auto-approval")
        return None
    if mode.tiers:
        return _tiered_check(run, need, reads, writes)
    if cls.kind == ToolKind.SHELL and not mode.shell_auto:
        run.step("mode_check", "passed", f"mode {mode.name} never allows shell calls by itself")
        return None
    if need == Requirement.WORKSPACE_WRITE and mode.ceiling == need and not _in_write_scope(mode, cls, writes):
        run.step("mode_check", "passed", f"mode {mode.name} allows only {_SCOPE_TEXT[mode.write_scope]} by itself")
        return None
    if need <= mode.ceiling and not (mode.deny_writes and _runs_or_writes(cls, writes)):
        run.step("mode_check", "allow", f"mode {mode.name} reaches {need.label}")
        return _verdict(run, "allow", f"{_mode_words(run)} allows {need.label}", "mode")
    run.step("mode_check", "passed", f"{need.label} is above mode {mode.name}")
    return None


# The Nexus CLI's EDIT_TOOLS (seed 004), plus the canonical in-place editors an agent may send under its modes.
# write_file is not one: the seed tiers it dangerous and not an edit tool, so ACCEPT_EDITS asks for it.
NEXUS_EDIT_TOOLS = frozenset(
    {"str_replace_editor", "str_replace_based_edit_tool", "edit_file", "create_file"}
    | {"Edit", "MultiEdit", "NotebookEdit"}
)


def _tiered_check(run: _Run, need: Requirement, reads: Sequence[str], writes: Sequence[str]) -> Verdict | None:
    """The Nexus CLI's modes decide by tool tier, not by what the call does: a safe tool's read is allowed (in
    DEFAULT and ACCEPT_EDITS outside the workspace too, never a credential or protected path); in ACCEPT_EDITS
    and YOLO its edit tools inside the workspace; every cautious or dangerous tool is asked, ``ls`` included."""
    mode, cls = run.mode, run.cls
    # the agent's own spelling (write_file and create_file are both Write, in different tiers)
    name = run.call.tool if tool_info(run.call.tool, run.call.provider).canonical == cls.tool else cls.tool
    tier = _tier(name, run.call.provider)
    if tier == "safe" and cls.requirement <= Requirement.READ_ONLY and not writes:
        if need <= Requirement.READ_ONLY:
            run.step("mode_check", "allow", f"mode {mode.name}: {name} is a safe tool")
            return _verdict(run, "allow", f"mode {mode.name} allows the safe tool {name}", "mode")
        if mode.reads_anywhere and reads and all(_plain_read(p, run.ctx) for p in reads):
            run.step("mode_check", "allow", f"mode {mode.name}: a safe tool reads outside the workspace")
            return _verdict(run, "allow", f"mode {mode.name} allows the safe tool {name} anywhere", "mode")
    if (
        mode.write_scope == "seed_edits"
        and name in NEXUS_EDIT_TOOLS
        and need == Requirement.WORKSPACE_WRITE
        and cls.kind == ToolKind.EDIT
    ):
        run.step("mode_check", "allow", f"mode {mode.name}: {name} is an edit tool inside the workspace")
        return _verdict(run, "allow", f"mode {mode.name} allows the edit tool {name}", "mode")
    allows = "safe tools and its edit tools" if mode.write_scope == "seed_edits" else "safe tools"
    run.step("mode_check", "passed", f"mode {mode.name} allows only {allows} by itself; {name} is {tier}")
    return None


def _plain_read(path: str, ctx: Context) -> bool:
    """A path a safe tool may read outside the workspace by mode: no credential, nothing protected, not /proc."""
    return not (is_credential(path, ctx) or is_protected(path, ctx) or reaches_elsewhere(path))


# Claude Code's acceptEdits also runs these without a prompt when they stay inside the workspace.
ACCEPT_EDITS_COMMANDS = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"})
_EDIT_ONLY_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "ApplyPatch"})  # not Delete, Move
_SCOPE_TEXT = {
    "all": "workspace writes",
    "edits_fs": "file edits and common filesystem commands",
    "edits": "file edits",
    "seed_edits": "the Nexus CLI's edit tools",
}


def _in_write_scope(mode: ModeSpec, cls: Classification, writes: Sequence[str]) -> bool:
    """Whether a workspace-write call is one the mode allows by itself (``ModeSpec.write_scope``)."""
    if mode.write_scope == "all":
        return True
    if cls.kind == ToolKind.EDIT:
        return cls.tool in _EDIT_ONLY_TOOLS
    if mode.write_scope == "edits" or cls.kind != ToolKind.SHELL or not cls.commands:
        return False
    # read-only commands (their redirects into the workspace are file edits) and the filesystem commands
    return all(
        c.requirement == Requirement.READ_ONLY
        or (c.argv and c.argv[0] in ACCEPT_EDITS_COMMANDS and not c.wrappers and not c.opaque)
        for c in cls.commands
    )


def _classifier_step(
    run: _Run,
    session: Session,
    writes: Sequence[str],
    answer: ClassifierAnswer | None,
    dry_run: bool,
    uncovered: list[Command] | None,
) -> Evaluation | None:
    spec = run.policy.classifier
    if spec is None:
        run.step("classifier", "skipped", "auto mode without a [classifier]: asking")
        return None
    if session.classifier_denials >= spec.max_denials:
        run.step("classifier", "skipped", f"{session.classifier_denials} consecutive denials: a person decides")
        return None
    if answer is None:
        if dry_run:
            run.step("classifier", "skipped", "not run in a check")
            return None
        return Evaluation(need="classifier")
    if answer.decision == "allow":
        run.step("classifier", "allow", answer.reason)
        return Evaluation(
            _verdict(run, "allow", f"auto mode classifier allowed: {answer.reason}".rstrip(": "), "classifier"),
            classifier_outcome="allow",
        )
    if answer.decision == "deny":
        run.step("classifier", "deny", answer.reason)
        return Evaluation(
            _verdict(run, "deny", f"auto mode classifier blocked: {answer.reason}".rstrip(": "), "classifier"),
            classifier_outcome="deny",
        )
    if spec.on_error == "ask":
        run.step("classifier", "error", f"{answer.reason}; on_error=ask")
        return None
    run.step("classifier", "error", f"{answer.reason}; fail closed")
    return Evaluation(
        _verdict(run, "deny", f"auto mode classifier failed ({answer.reason}); fail closed", "classifier")
    )
