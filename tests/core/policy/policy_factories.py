"""Hand-built classifications and policies for engine tests (no classifier involved)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from nexusd.core.model import Classification, Command, Context, Flag, Redirect, Requirement, Session, ToolKind
from nexusd.core.policy.policy import Policy, ProviderSettings
from nexusd.core.policy.rules import parse_rule
from nexusd.protocol import CallInfo

WS = "/ws/proj"
HOME = "/home/u"
CTX = Context(cwd=WS, workspace_roots=(WS,), home=HOME)
RO, WW, DFA = Requirement.READ_ONLY, Requirement.WORKSPACE_WRITE, Requirement.DANGER_FULL_ACCESS


def shell(
    *cmds: str,
    req: Requirement = RO,
    flags: Iterable[Flag] = (),
    reads: Iterable[str] = (),
    writes: Iterable[str] = (),
    redirects: Iterable[Redirect] = (),
) -> Classification:
    return Classification(
        kind=ToolKind.SHELL,
        tool="Bash",
        requirement=req,
        commands=tuple(Command(tuple(shlex.split(c)), text=c) for c in cmds),
        reads=tuple(reads),
        writes=tuple(writes),
        redirects=tuple(redirects),
        flags=frozenset(flags),
    )


def read(
    path: str, *, tool: str = "Read", flags: Iterable[Flag] = (), kind: ToolKind = ToolKind.READ, req: Requirement = RO
) -> Classification:
    fl = set(flags)
    if not path.startswith(WS + "/") and path != WS:
        fl.add(Flag.OUTSIDE_WORKSPACE)
    return Classification(kind=kind, tool=tool, requirement=req, reads=(path,), flags=frozenset(fl))


def edit(path: str, *, tool: str = "Edit", flags: Iterable[Flag] = ()) -> Classification:
    fl = set(flags)
    if not path.startswith(WS + "/"):
        fl.add(Flag.OUTSIDE_WORKSPACE)
    return Classification(kind=ToolKind.EDIT, tool=tool, requirement=WW, writes=(path,), flags=frozenset(fl))


def fetch(domain: str, flags: Iterable[Flag] = ()) -> Classification:
    return Classification(
        kind=ToolKind.FETCH,
        tool="WebFetch",
        requirement=DFA,
        url=f"https://{domain}/x",
        domain=domain,
        flags=frozenset(flags),
    )


def tool(name: str, kind: ToolKind, req: Requirement = DFA, flags: Iterable[Flag] = ()) -> Classification:
    return Classification(kind=kind, tool=name, requirement=req, flags=frozenset(flags))


def policy(
    allow: Iterable[str] = (), ask: Iterable[str] = (), deny: Iterable[str] = (), *, root: str = WS, **kw: object
) -> Policy:
    rules = []
    for kind, texts in (("deny", deny), ("ask", ask), ("allow", allow)):
        for i, t in enumerate(texts):
            rules.append(
                parse_rule(
                    t,
                    kind,
                    layer="user",
                    origin=f"{root}/policy.toml:{i + 1}",  # type: ignore[arg-type]
                    policy_root=root,
                )
            )
    return Policy(rules=tuple(rules), builtin=False, **kw)  # type: ignore[arg-type]


def call(tool_name: str = "Bash", provider: str = "claude", mode: str | None = None, **inp: object) -> CallInfo:
    return CallInfo(provider=provider, session="s1", tool=tool_name, input=dict(inp), cwd=WS, mode=mode)


def session(mode: str | None = None, provider: str = "claude", **kw: object) -> Session:
    return Session(id="s1", provider=provider, agent_mode=mode, **kw)  # type: ignore[arg-type]


__all__ = [
    "CTX",
    "DFA",
    "HOME",
    "RO",
    "WS",
    "WW",
    "ProviderSettings",
    "call",
    "edit",
    "fetch",
    "policy",
    "read",
    "session",
    "shell",
    "tool",
]
