"""The daemon's view of policy: layered files, learned rules, trust. INTERIM (built-in default only)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from nexusd.core.engine import Policy
from nexusd.protocol import PolicySource, RuleInfo


class PolicyStore:
    """Holds the last good policy; ``load`` never leaves it half-replaced."""

    def __init__(
        self,
        *,
        config_dir: Path,
        state_dir: Path,
        managed_dir: Path,
        protected_dirs: tuple[str, ...] = (),
    ) -> None:
        self.config_dir = config_dir
        self.state_dir = state_dir
        self.managed_dir = managed_dir
        self.protected_dirs = protected_dirs
        self.policy = Policy()
        self.errors: list[str] = []

    def load(self) -> list[str]:
        """(Re)read every layer; on error keep the last good policy and return the errors."""
        self.errors = []
        return self.errors

    def sources(self) -> list[PolicySource]:
        return [PolicySource(layer="builtin", path="<builtin>", loaded=True)]

    def rules(self) -> list[RuleInfo]:
        return []

    def change_rule(self, action: Literal["add", "remove"], kind: str, rule: str) -> None:
        raise ValueError("rules cannot be changed yet: the policy engine is not in place")

    def learn(self, kind: Literal["allow", "deny"], rules: list[str]) -> None:
        raise ValueError("rules cannot be learned yet: the policy engine is not in place")

    def trust(self, action: Literal["add", "remove"], path: str) -> None:
        raise ValueError("folder trust is not in place yet")

    def trusted(self) -> list[str]:
        return []
