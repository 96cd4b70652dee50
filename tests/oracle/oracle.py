"""The runtime oracle: what the gate claims about a command, against what the command really does.

Each command of the corpus (tests/oracle/corpus.py) runs once in the jail (tests/oracle/jail.py) and is
judged by the real gate (``check_offline``: store, classifier, engine) in ``default`` mode under a policy
that denies reading the decoy secrets. The outcomes:

- ``wrong_allow``: the gate allowed it, but it wrote a file, reached for the network, read a secret or read
  outside the workspace, or ran a program the gate never saw (what ``default`` allows must be read-only);
- ``asked_secret``: it read a secret a deny rule covers, and the gate asked instead of denying (a click
  would approve what the user's rule forbids);
- ``over_block``: it only read the workspace, and the gate did not allow it;
- ``unclaimed``: paths it read or wrote below the jail that the classification neither names nor covers
  (a recursive read, a dynamic or unknown program): informative, the next class to look at.

``python -m tests.oracle.oracle`` prints the report for the whole corpus.
"""

from __future__ import annotations

import os
import posixpath
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nexusd.core.classify import classify
from nexusd.core.model import Classification, Context, Flag
from nexusd.decision.offline import check_offline
from nexusd.policy.filesystem import RealFileSystem
from nexusd.protocol import CallInfo
from tests.oracle import corpus, jail

POLICY = """[permissions]
deny = ["Read(~/.ssh/**)", "Read(~/.aws/**)", "Read(~/.config/gh/**)", "Read(~/.netrc)", "Read(./.env)"]
"""
# what git itself refreshes while only reading (git status rewrites a stale index): not the command's effect
_GIT_HOUSEKEEPING = ("/.git/index", "/.git/index.lock")
_UNKNOWN = {Flag.DYNAMIC.value, Flag.UNPARSEABLE.value, Flag.HIDDEN_EFFECT.value}


@dataclass
class Outcome:
    command: str
    decision: str
    reason: str
    reality: jail.Reality
    kinds: list[str] = field(default_factory=list)  # wrong_allow, asked_secret, over_block, read_only
    why: str = ""
    unclaimed: list[str] = field(default_factory=list)


class Oracle:
    """One jail world and one policy, reused for every command (the world is reset before each)."""

    def __init__(self, root: Path) -> None:
        self.world = jail.World(root)
        self.config, self.state, self.managed = root / "cfg", root / "state", root / "managed"
        for d in (self.config, self.state, self.managed):
            d.mkdir(parents=True, exist_ok=True)
        (self.config / "policy.toml").write_text(POLICY)

    def judge(self, command: str) -> Outcome:
        w = self.world
        w.reset()
        previous = os.environ.get("HOME")
        os.environ["HOME"] = str(w.home)  # the store reads the home the rules' ~ means
        try:
            call = CallInfo(
                provider="claude",
                session="oracle",
                tool="Bash",
                input={"command": command},
                cwd=str(w.ws),
                mode="default",
                workspace=str(w.ws),
            )
            verdict = check_offline(call, config_dir=self.config, state_dir=self.state, managed_dir=self.managed)
        finally:
            if previous is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = previous
        cls = classify(
            CallInfo(provider="claude", session="o", tool="Bash", input={"command": command}, cwd=str(w.ws)),
            Context(cwd=str(w.ws), workspace_roots=(str(w.ws),), home=str(w.home)),
            RealFileSystem(),
        )
        reality = jail.run(w, command)
        out = Outcome(command, verdict.decision, verdict.reason, reality)
        self._compare(out, cls)
        return out

    def _compare(self, out: Outcome, cls: Classification) -> None:
        w, r = self.world, out.reality
        root, ws = str(w.root), str(w.ws)
        secrets = w.secrets()
        secret_reads = sorted(r.reads & secrets)
        writes = sorted(p for p in r.writes if not p.endswith(_GIT_HOUSEKEEPING) and not p.startswith(str(w.trace)))
        outside = sorted(p for p in r.reads if p.startswith(root + "/") and not _within(p, ws) and p not in secrets)
        problems = []
        if secret_reads:
            problems.append(f"read {', '.join(secret_reads)}")
        if writes:
            problems.append(f"wrote {', '.join(writes[:3])}")
        if r.network:
            problems.append("reached for the network")
        if outside:
            problems.append(f"read outside the workspace: {', '.join(outside[:3])}")
        if out.decision == "allow":
            unseen = self._unseen_execs(out, cls)
            if unseen:
                problems.append(f"ran {', '.join(unseen)}, which the gate did not see")
            if problems:
                out.kinds.append("wrong_allow")
                out.why = "; ".join(problems)
        if secret_reads and out.decision == "ask":
            out.kinds.append("asked_secret")
            out.why = out.why or "; ".join(problems)
        if r.missing:
            out.kinds.append("not_run")  # a program it names is not installed here: nothing to compare
        elif not (secret_reads or writes or r.network or outside or r.timed_out):
            out.kinds.append("read_only")
            if out.decision != "allow":
                out.kinds.append("over_block")
        out.unclaimed = self._unclaimed(out, cls)

    def _unseen_execs(self, out: Outcome, cls: Classification) -> list[str]:
        """Programs the command started that are none of the commands the gate classified (nor bash, nor a
        helper of one: git runs git-* programs)."""
        seen = {posixpath.basename(c.argv[0]) for c in cls.commands if c.argv} | {"bash", "strace"}
        seen |= {w for c in cls.commands for w in c.wrappers}
        unseen = []
        for path in out.reality.execs:
            base = posixpath.basename(path)
            if base in seen or (base.startswith("git-") and "git" in seen):
                continue
            unseen.append(base)
        return list(dict.fromkeys(unseen))

    def _unclaimed(self, out: Outcome, cls: Classification) -> list[str]:
        if _UNKNOWN & {f.value for f in cls.flags} or out.decision == "deny":
            return []
        r, w = out.reality, self.world
        if any(c.opaque for c in cls.commands):
            return []  # an unknown program: everything it touches is its own business, and it is asked
        claimed = set(cls.reads) | set(cls.writes)
        below = tuple(cls.recursive_reads)
        missing = []
        for p in sorted(r.reads | r.writes):
            if not p.startswith(str(w.root) + "/") or p.startswith(str(w.trace)) or p.endswith(_GIT_HOUSEKEEPING):
                continue
            if p in claimed or any(_within(p, d) for d in below) or "/.git/" in p:
                continue
            missing.append(p)
        return missing


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def report(outcomes: list[Outcome]) -> str:
    lines = []
    for kind in ("wrong_allow", "asked_secret", "over_block"):
        hit = [o for o in outcomes if kind in o.kinds]
        lines.append(f"== {kind}: {len(hit)}")
        lines += [f"  {o.command!r}: {o.decision} -- {o.why or o.reason[:160]}" for o in hit]
    ro = [o for o in outcomes if "read_only" in o.kinds]
    over = [o for o in ro if "over_block" in o.kinds]
    lines.append(f"read-only commands: {len(ro)}, over-blocked {len(over)} ({100 * len(over) / max(1, len(ro)):.1f} %)")
    unclaimed = [o for o in outcomes if o.unclaimed]
    lines.append(f"== unclaimed paths in {len(unclaimed)} commands")
    lines += [f"  {o.command!r}: {', '.join(o.unclaimed[:4])}" for o in unclaimed]
    return "\n".join(lines)


def main() -> int:
    why = jail.available()
    if why:
        print(f"the oracle cannot run here: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="nxoracle") as tmp:
        oracle = Oracle(Path(tmp))
        commands = sys.argv[1:] or corpus.build()
        outcomes = [oracle.judge(c) for c in commands]
    print(report(outcomes))
    return 1 if any("wrong_allow" in o.kinds for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
