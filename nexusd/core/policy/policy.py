"""The Policy: everything the engine needs from the policy files, as immutable plain data.

Built by ``nexusd.policy.loader`` (the shell reads files; this module never does). One Policy is the
merge of every layer for one workspace: deny/ask rules from every layer, allow rules flagged with
their layer so the engine can ignore a project's allow rules in an untrusted workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from nexusd.core.policy.rules import Rule

OnError = Literal["deny", "ask", "allow"]
# none: the workspace has no project policy; new: none, and nobody has trusted or distrusted it yet ([trust]
# ask_new_sessions on: a new session's first call there asks)
Trust = Literal["trusted", "untrusted", "unknown", "none", "new"]


@dataclass(frozen=True, slots=True)
class HookSpec:
    """An external hook command: gets the request as JSON, answers allow / ask / deny."""

    command: tuple[str, ...]
    tools: tuple[Rule, ...] = ()  # bare-rule matchers; empty = every call
    timeout: float = 5.0
    on_error: OnError = "deny"
    origin: str = "builtin"

    def applies(self, cls: Any) -> bool:
        return not self.tools or any(r.covers_call(cls) for r in self.tools)


@dataclass(frozen=True, slots=True)
class ClassifierSpec:
    """Auto mode's external classifier command."""

    command: tuple[str, ...]
    timeout: float = 10.0
    on_error: Literal["deny", "ask"] = "deny"  # fail closed; "ask" = fail open to a person, never to allow
    max_denials: int = 3
    origin: str = "builtin"


@dataclass(frozen=True, slots=True)
class NotifySpec:
    """``[notify]``: how an ask reaches a person who is not looking at a UI (nexusd/daemon/notify_person.py).

    Read from the user's and the managed policy only: a project file must not send your asks elsewhere.
    """

    no_ui: Literal["agent", "deny"] = "agent"  # no UI and nothing configured: the agent's own dialog, or deny
    desktop: bool = False  # freedesktop notifications on the session bus
    webhook: str | None = None  # http(s) URL
    webhook_format: Literal["json", "ntfy", "slack", "discord"] = "json"
    web_url: str | None = None  # nexus-web's address, for links (never a token)
    include_command: bool = False  # commands leave the machine (webhooks) only when opted in; always redacted
    redact: tuple[str, ...] = ()  # more regular expressions to blank out, besides the built-in secret patterns
    min_interval: float = 30.0  # seconds between two notifications on one channel
    group_window: float = 2.0  # asks arriving this close together make one notification

    @property
    def enabled(self) -> bool:
        return self.desktop or self.webhook is not None


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Per-provider configuration (allowed modes, auto-approval, prompt timeout), as the Nexus CLI has it."""

    allowed_modes: frozenset[str] | None = None  # internal mode names; None = no restriction
    auto_approval: bool | None = None  # None = the provider's default (Gemini: off)
    prompt_timeout: float | None = None
    default_mode: str | None = None


# Gemini has no auto-approval unless a policy turns it on (every call but a safe tool goes to a person).
PROVIDER_DEFAULTS: Mapping[str, ProviderSettings] = MappingProxyType({"gemini": ProviderSettings(auto_approval=False)})


@dataclass(frozen=True, slots=True)
class Limits:
    """Runaway limits on automatic allows per agent session and minute (``[limits]``); 0 turns one off."""

    calls_per_minute: int = 600
    repeats_per_minute: int = 60  # the same call (tool, input, cwd)


MAX_DERIVED = 4096  # Policy.derived's answers kept per policy
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    default_mode: str | None = None
    additional_directories: tuple[str, ...] = ()
    allowed_modes: frozenset[str] | None = None  # managed ceiling on modes (internal names)
    disable_bypass: bool = False
    disable_bypass_origin: str = ""
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    hooks: tuple[HookSpec, ...] = ()
    classifier: ClassifierSpec | None = None
    # Each layer's raw [sandbox] table: (table, file path, managed, project). nexusd.policy.sandbox_settings merges.
    sandbox_layers: tuple[tuple[Any, ...], ...] = ()
    # from the merged [sandbox] settings (the loader computes them): what the sandbox's deny_read hides (no mode
    # reads it by itself either), the denied domains (refused for every tool, in every mode), and the project
    # lines that would have loosened the sandbox and are ignored (the trust question lists them)
    sandbox_hidden: tuple[str, ...] = ()
    denied_domains: tuple[str, ...] = ()
    sandbox_ignored: tuple[str, ...] = ()
    workspace: str | None = None
    trust: Trust = "none"
    builtin: bool = True  # no policy file contributed anything
    warnings: tuple[str, ...] = ()
    # why nothing may be allowed by a rule or a mode: a layer could not be read and has no last good copy
    # (its deny rules are unknown). Asks still reach a person; deny rules still deny.
    locked: str | None = None
    # auditd's disk_full_action: "deny" refuses what cannot be recorded; "continue" decides on, loudly
    audit_on_failure: Literal["continue", "deny"] = "continue"
    # [trust] ask_new_sessions: a new agent session in a workspace nobody has trusted or distrusted asks
    ask_new_sessions: bool = True
    limits: Limits = Limits()
    notify: NotifySpec = NotifySpec()
    # Answers derived from the fields above, kept for the policy's life (it is immutable): every decision
    # asks for the rules of each kind and its provider's settings, so they are computed once per policy.
    _derived: dict[tuple[str | None, ...], Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def derived(self, key: tuple[str | None, ...], make: Callable[[], _T]) -> _T:
        """``make()``, computed once per policy and ``key`` (a pure function of the policy and the key).
        Keys may carry strings a client sent (a provider, a mode): at most ``MAX_DERIVED`` are kept."""
        got: _T | None = self._derived.get(key)
        if got is None:
            if len(self._derived) >= MAX_DERIVED:
                self._derived.clear()
            got = self._derived[key] = make()
        return got

    def provider(self, name: str) -> ProviderSettings:
        got: ProviderSettings | None = self._derived.get(("provider", name))
        return got if got is not None else self.derived(("provider", name), lambda: self._provider(name))

    def _provider(self, name: str) -> ProviderSettings:
        configured = self.providers.get(name)
        default = PROVIDER_DEFAULTS.get(name, ProviderSettings())
        if configured is None:
            return default
        return ProviderSettings(
            allowed_modes=configured.allowed_modes if configured.allowed_modes is not None else default.allowed_modes,
            auto_approval=configured.auto_approval if configured.auto_approval is not None else default.auto_approval,
            prompt_timeout=configured.prompt_timeout or default.prompt_timeout,
            default_mode=configured.default_mode or default.default_mode,
        )

    def of_kind(self, kind: str) -> tuple[Rule, ...]:
        got: tuple[Rule, ...] | None = self._derived.get(("kind", kind))
        if got is None:
            got = self.derived(("kind", kind), lambda: tuple(r for r in self.rules if r.kind == kind))
        return got
