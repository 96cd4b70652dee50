"""The daemon's view of policy: layered files, per-workspace project layers, learned rules, trust.

``load()`` (re)reads the global layers (managed, user, learned, and Claude Code's settings when
enabled); each file keeps its last good parse, so a broken file never drops rules that were in force
and never half-applies. Project layers depend on the call's workspace and are loaded on demand by
``policy_for(workspace)``, cached by path, mtime and trust state.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from nexusd.core.policy.policy import Policy
from nexusd.core.policy.rules import RuleError, parse_rule
from nexusd.core.policy.suggest import blanket_reason
from nexusd.policy import lastgood
from nexusd.policy import learned as learned_file
from nexusd.policy.filesystem import lexists, read_regular_text
from nexusd.policy.loader import (
    CLAUDE_MANAGED,
    Layer,
    managed_file_problem,
    merge,
    parse_claude_settings,
    parse_policy,
)
from nexusd.policy.trust import State, TrustStore
from nexusd.protocol import PolicySource, RuleInfo, Verdict

_TRUST_RULE = re.compile(r"Trust\((/.*)\)\Z")
_NEVER_LEARN = frozenset({"catastrophic", "protected_path", "unparseable", "dynamic", "large_write"})
MAX_PROJECT_CACHE = 256
MAX_LAYER_BYTES = 1 << 20  # a policy or settings file past a MiB is refused (its last good copy stands)
# A workspace's own layers: (path under the workspace, layer name, format).
_PROJECT_FILES = (("/.nexus/policy.toml", "project", "nexus"),)
_PROJECT_FILES_CLAUDE = (
    *_PROJECT_FILES,
    ("/.claude/settings.json", "claude-project", "claude"),
    ("/.claude/settings.local.json", "claude-local", "claude"),
)


@dataclass
class _FileState:
    mtime: int
    layer: Layer  # the last good parse (or the failing one when there never was a good one)
    error: str | None = None


class LayerFiles:
    """Policy and settings files read into layers. Each file keeps its last good parse (this run) and, for a
    global layer, its last good copy on disk (``lastgood``), so a broken file never drops rules that were in
    force and never half-applies; one with no good version anywhere locks the policy (``locked``, or
    ``project_locks`` for a workspace's own file, which locks that workspace only)."""

    def __init__(self, state_dir: Path, home: str) -> None:
        self.state_dir = state_dir
        self.home = home
        self.warnings: list[str] = []  # since the last load: a last good copy that could not be kept
        self.files: dict[str, _FileState] = {}
        self.locked: list[str] = []  # broken global layers with no good parse anywhere (see lastgood.py)
        self.project_locks: dict[str, str] = {}  # broken project files with no good parse this run

    def read(
        self, path: Path, layer: str, *, kind: str = "nexus", project: bool = False, managed: bool = False
    ) -> tuple[Layer | None, str | None]:
        """(layer to use, error). A broken file yields its last good layer, or nothing, plus the error."""
        key = str(path)
        try:
            st = path.stat()
        except FileNotFoundError:
            self.files.pop(key, None)
            self.project_locks.pop(key, None)
            if not project:
                lastgood.forget(self.state_dir, path)  # gone on purpose: its copy must not come back
            return None, None
        except OSError as e:
            return self.fallback(path, layer, kind, project, managed, f"{path}: cannot read: {e.strerror}")
        old = self.files.get(key)
        if old is not None and old.mtime == st.st_mtime_ns and old.error is None:
            return old.layer, None
        try:
            text = read_regular_text(path, MAX_LAYER_BYTES)
        except (OSError, UnicodeDecodeError) as e:
            return self.fallback(path, layer, kind, project, managed, f"{path}: cannot read: {e}")
        parsed = self.parse(text, path, layer, kind, project, managed)
        if parsed.errors:
            good, err = self.fallback(path, layer, kind, project, managed, "; ".join(parsed.errors))
            self.files[key] = _FileState(st.st_mtime_ns, good or parsed, err)
            return good, err
        self.files[key] = _FileState(st.st_mtime_ns, parsed)
        self.project_locks.pop(key, None)
        if not project:
            try:
                lastgood.save(self.state_dir, path, text)
            except OSError as e:  # the layer still applies; only a later start's fallback is lost
                self.warnings.append(f"{path}: cannot keep a last good copy: {e}")
        return parsed, None

    def parse(self, text: str, path: Path, layer: str, kind: str, project: bool, managed: bool) -> Layer:
        if kind == "claude":
            return parse_claude_settings(text, path, layer=layer, project=project)
        return parse_policy(text, path, layer=layer, project=project, managed=managed, home=self.home)

    def fallback(
        self, path: Path, layer: str, kind: str, project: bool, managed: bool, error: str
    ) -> tuple[Layer | None, str]:
        """A layer that cannot be read or parsed: its last good parse (this run), else its last good copy
        (an earlier run), else nothing, and the policy locks (``Policy.locked``): its deny rules are unknown."""
        good = self.last_good(str(path))
        if good is not None:
            return good, f"{error} (the last good version stays in force)"
        copy = None if project else lastgood.load(self.state_dir, path)
        if copy is not None:
            parsed = self.parse(copy.text, path, layer, kind, project, managed)
            if not parsed.errors:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(copy.saved))
                return parsed, f"{error} (USING THE LAST GOOD COPY from {when} until the file is fixed)"
        reason = f"{path} cannot be used ({error}) and has no last good copy"
        if project:
            self.project_locks[str(path)] = reason  # locks that workspace only: a repository cannot lock all
        elif reason not in self.locked:
            self.locked.append(reason)
        return None, f"{error} (NO LAST GOOD COPY: nothing is allowed by a rule or a mode until it is fixed)"

    def last_good(self, key: str) -> Layer | None:
        st = self.files.get(key)
        return st.layer if st is not None and not st.layer.errors else None

    def collect(
        self, specs: list[tuple[Path, str, str, bool, bool]]
    ) -> tuple[list[Layer], list[PolicySource], list[str]]:
        layers: list[Layer] = []
        sources: list[PolicySource] = []
        errors: list[str] = []
        for path, name, kind, project, managed in specs:
            layer, err = self.read(path, name, kind=kind, project=project, managed=managed)
            if layer is None and err is None:
                continue
            if err:
                errors.append(err)
            if layer is not None:
                layers.append(layer)
            sources.append(
                PolicySource(
                    layer=name, path=str(path), loaded=err is None, error=err, last_good=bool(err) and layer is not None
                )
            )
        return layers, sources, errors


class PolicyStore:
    """Holds the last good policy; ``load`` never leaves it half-replaced."""

    def __init__(
        self,
        *,
        config_dir: Path,
        state_dir: Path,
        managed_dir: Path,
        protected_dirs: tuple[str, ...] = (),
        home: str | None = None,
        claude_managed: str | None = None,
        trusted_uids: Sequence[int] = (0,),
    ) -> None:
        self.config_dir = Path(config_dir)
        self.state_dir = Path(state_dir)
        self.managed_dir = Path(managed_dir)
        self.protected_dirs = protected_dirs
        self.home = home or os.path.expanduser("~")
        # Claude Code's own user settings: where Claude Code reads them (CLAUDE_CONFIG_DIR moves ~/.claude)
        claude_dir = os.environ.get("CLAUDE_CONFIG_DIR") if home is None else None
        self.claude_user_settings = Path(claude_dir or os.path.join(self.home, ".claude")) / "settings.json"
        self.claude_managed = claude_managed
        self.trusted_uids = tuple(trusted_uids)
        self.learned_path = self.state_dir / "learned.toml"
        self.trust_store = TrustStore(self.state_dir / "trust.toml")
        self.policy = Policy()
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._layers = LayerFiles(self.state_dir, self.home)
        self._global: list[Layer] = []
        self._global_sources: list[PolicySource] = []
        self._project_cache: dict[str, tuple[tuple[object, ...], Policy, list[Layer]]] = {}
        self._miss_lock = threading.Lock()  # project-policy misses, from the daemon's decision pool

    # ------------------------------------------------------------------ global layers

    def load(self) -> list[str]:
        """(Re)read every global layer; errors are returned (and kept in ``errors``), last good stays."""
        self._layers.locked = []
        self._layers.warnings = []
        errors: list[str] = []
        specs: list[tuple[Path, str, str, bool, bool]] = []
        managed_sources: list[PolicySource] = []
        managed_good: list[Layer] = []
        mfiles = [self.managed_dir / "policy.toml"]
        d = self.managed_dir / "policy.d"
        if d.is_dir():
            mfiles += sorted(d.glob("*.toml"))
        for f in mfiles:
            if not f.exists():
                continue
            problem = managed_file_problem(f, self.trusted_uids)
            if problem:
                # never silently skipped: its last good copy, or a lock until an administrator fixes it
                good, err = self._layers.fallback(f, "managed", "nexus", False, True, problem)
                errors.append(err)
                if good is not None:
                    managed_good.append(good)
                managed_sources.append(
                    PolicySource(layer="managed", path=str(f), loaded=False, error=err, last_good=good is not None)
                )
                continue
            specs.append((f, "managed", "nexus", False, True))
        specs.append((self.config_dir / "policy.toml", "user", "nexus", False, False))
        layers, sources, errs = self._layers.collect(specs)
        layers = managed_good + layers
        errors += errs
        import_claude = next((la.import_claude for la in layers if la.managed and la.import_claude is not None), None)
        if import_claude is None:
            # on unless a policy says otherwise (issue 38): a Claude Code user's allow rules were silently
            # ignored; deny rules of every layer are checked before any allow rule, so theirs only add
            import_claude = next((la.import_claude for la in layers if la.import_claude is not None), True)
        claude_layers: list[Layer] = []
        if import_claude:
            cm = next((la.claude_managed for la in layers if la.claude_managed), None)
            cspecs = [
                (Path(self.claude_managed or cm or CLAUDE_MANAGED), "claude-managed", "claude", False, True),
                (self.claude_user_settings, "claude-user", "claude", False, False),
            ]
            claude_layers, csources, cerrs = self._layers.collect(cspecs)
            for la in claude_layers:
                la.managed = la.layer == "claude-managed"
            sources += csources
            errors += cerrs
        learned, lsources, lerrs = self._layers.collect([(self.learned_path, "learned", "nexus", False, False)])
        sources += lsources
        errors += lerrs
        ordered = (
            [la for la in layers if la.managed]
            + [la for la in claude_layers if la.managed]
            + [la for la in layers if not la.managed]
            + [la for la in claude_layers if not la.managed]
            + learned
        )
        self._global = ordered
        self._global_sources = managed_sources + sources
        self._project_cache.clear()
        self.policy = self._lock(merge(ordered))
        self.errors = errors
        self.warnings = [*self._layers.warnings, *self.policy.warnings]
        self._import_claude = bool(import_claude)
        return errors

    @property
    def locked(self) -> str | None:
        return "; ".join(self._layers.locked) or None

    def _lock(self, policy: Policy) -> Policy:
        return dataclasses.replace(policy, locked=self.locked) if self._layers.locked else policy

    # ------------------------------------------------------------------ per workspace

    def policy_for(self, workspace: str | None) -> Policy:
        """The merged policy for a call in ``workspace`` (global layers + that project's layers)."""
        if not workspace:
            return self.policy
        ws = os.path.normpath(workspace)
        # Stat every project file on every call (the cache below is validated by these stamps); plain
        # strings and os.stat here, Path objects only on a miss.
        names = _PROJECT_FILES_CLAUDE if getattr(self, "_import_claude", False) else _PROJECT_FILES
        base = ws.rstrip("/")
        stamps: list[int | None] = []
        found = False
        for rel, _, _ in names:
            path = base + rel
            if not lexists(path):  # the common answer, without raising and catching FileNotFoundError
                stamps.append(None)
                continue
            try:
                stamps.append(os.stat(path).st_mtime_ns)
                found = True
            except (OSError, ValueError):
                stamps.append(None)
        if not found:
            return self._policy_without_project(ws)
        files = [(Path(base + rel), n, k) for rel, n, k in names]
        trust = self.trust_store.state(ws)
        key = (tuple(stamps), trust, id(self._global))
        hit = self._project_cache.get(ws)
        if hit is not None and hit[0] == key:
            return hit[1]
        # A miss reads and merges files: the daemon asks from its decision pool's threads, so misses take
        # turns (the hit above is one dict lookup; the event loop never takes this lock).
        with self._miss_lock:
            hit = self._project_cache.get(ws)
            if hit is not None and hit[0] == key:
                return hit[1]
            return self._project_policy(ws, files, key, trust)

    def _policy_without_project(self, ws: str) -> Policy:
        """The global policy; for a workspace nobody has trusted or distrusted (``[trust] ask_new_sessions``
        on), the same rules marked ``trust="new"`` with the workspace, so that a new session's first call
        there asks the trust question (the engine's trust step). One trust-file stat per call (cached by
        mtime); an unreadable trust file counts as distrust (``TrustStore.state``): no question."""
        pol = self.policy
        if not pol.ask_new_sessions or self.trust_store.state(ws) != "unknown":
            return pol
        hit = self._project_cache.get(ws)
        if hit is not None and hit[0][0] == "new" and hit[0][1] is pol:  # by identity: a reload makes a new one
            return hit[1]
        key: tuple[object, ...] = ("new", pol)
        new = dataclasses.replace(pol, workspace=ws, trust="new")
        while len(self._project_cache) >= MAX_PROJECT_CACHE:
            self._project_cache.pop(next(iter(self._project_cache)), None)
        self._project_cache[ws] = (key, new, [])
        return new

    def _project_policy(
        self, ws: str, files: list[tuple[Path, str, str]], key: tuple[object, ...], trust: State
    ) -> Policy:
        layers, _sources, errors = self._layers.collect([(f, n, k, True, False) for f, n, k in files])
        for e in errors:
            if e not in self.errors:
                self.errors.append(e)
        learned = [la for la in self._global if la.layer == "learned"]
        rest = [la for la in self._global if la.layer != "learned"]
        pol = self._lock(merge([*rest, *layers, *learned], workspace=ws, trust=trust))
        locks = self._layers.project_locks
        project_locks = [locks[str(f)] for f, _, _ in files if str(f) in locks]
        if project_locks:
            reasons = "; ".join(x for x in (pol.locked, *project_locks) if x)
            pol = dataclasses.replace(pol, locked=reasons)
        while len(self._project_cache) >= MAX_PROJECT_CACHE:
            self._project_cache.pop(next(iter(self._project_cache)), None)
        self._project_cache[ws] = (key, pol, layers)
        return pol

    # ------------------------------------------------------------------ introspection

    def layer_files(self) -> list[tuple[str, Path]]:
        """Where each global layer lives (existing or not), in precedence order; the project layers are
        files relative to each workspace (``project_files``). Watched by the daemon, listed by
        ``nexusctl policy paths``."""
        out: list[tuple[str, Path]] = [
            ("managed", self.managed_dir / "policy.toml"),
            ("managed", self.managed_dir / "policy.d"),
        ]
        out.append(("user", self.config_dir / "policy.toml"))
        if getattr(self, "_import_claude", False):
            cm = next((la.claude_managed for la in self._global if la.claude_managed), None)
            out += [
                ("claude-managed", Path(self.claude_managed or cm or CLAUDE_MANAGED)),
                ("claude-user", self.claude_user_settings),
            ]
        out.append(("learned", self.learned_path))
        return out

    def project_files(self) -> list[tuple[str, str]]:
        """(layer, path relative to a workspace) of the project layers."""
        names = _PROJECT_FILES_CLAUDE if getattr(self, "_import_claude", False) else _PROJECT_FILES
        return [(n, rel.lstrip("/")) for rel, n, _ in names]

    def sources(self) -> list[PolicySource]:
        out = list(self._global_sources)
        for _, _pol, layers in list(self._project_cache.values()):  # (a pool thread may add one)
            out += [PolicySource(layer=la.layer, path=la.path, loaded=la.loaded) for la in layers]
        if not out:
            out.append(PolicySource(layer="builtin", path="<builtin>", loaded=True))
        return out

    def rules(self) -> list[RuleInfo]:
        layers = list(self._global)
        for _, _pol, project_layers in list(self._project_cache.values()):
            layers += project_layers
        return _rule_infos(layers)

    # ------------------------------------------------------------------ changes

    def change_rule(self, action: Literal["add", "remove"], kind: str, rule: str) -> None:
        """Add or remove a rule in learned.toml (the only file nexusd writes). Raises ValueError."""
        if kind not in ("allow", "ask", "deny"):
            raise ValueError(f"unknown rule kind {kind!r}")
        rule = rule.strip()
        if action == "add":
            check_learnable(kind, rule)
            learned_file.add_rules(self.learned_path, kind, [rule])
        elif action == "remove":
            if not learned_file.remove_rule(self.learned_path, kind, rule):
                raise ValueError(
                    f"{kind} rule {rule!r} is not in {self.learned_path} (only learned rules can be "
                    "removed here; edit the other policy files by hand)"
                )
        else:
            raise ValueError(f"unknown action {action!r}")
        self._reload_learned()

    def learn(self, kind: Literal["allow", "deny"], rules: list[str], *, verdict: Verdict | None = None) -> None:
        """Persist answers with scope always (allow) / never (deny). All rules are checked before any is
        written, so a refusal changes nothing. ``Trust(/path)`` pseudo-rules set folder trust."""
        if kind not in ("allow", "deny"):
            raise ValueError(f"only allow and deny rules are learned, not {kind!r}")
        if not rules:
            raise ValueError("no rule to remember")
        _refuse_never_learned(kind, verdict, "always")
        trust: list[str] = []
        plain: list[str] = []
        for r in rules:
            r = r.strip()
            m = _TRUST_RULE.match(r)
            if m:
                trust.append(m.group(1))
                continue
            check_learnable(kind, r)
            plain.append(r)
        for ws in trust:
            self.trust_store.set(ws, "trusted" if kind == "allow" else "untrusted")
        if plain:
            learned_file.add_rules(self.learned_path, kind, plain)
        self._reload_learned()

    def _reload_learned(self) -> None:
        errs = self.load()
        if errs:
            self.errors = errs

    def trust(self, action: Literal["add", "remove"], path: str) -> None:
        if not path or not os.path.isabs(path):
            raise ValueError(f"trust needs an absolute path, not {path!r}")
        if action == "add":
            self.trust_store.set(os.path.realpath(path), "trusted")
        elif action == "remove":
            self.trust_store.set(os.path.realpath(path), "untrusted")
        else:
            raise ValueError(f"unknown action {action!r}")
        self._project_cache.clear()

    def trusted(self) -> list[str]:
        try:
            return self.trust_store.trusted()
        except Exception:
            return []


def _rule_infos(layers: list[Layer]) -> list[RuleInfo]:
    """Every rule of these layers as ``nexusctl rules`` lists it: an allow that is a blanket rule carries
    the warning; only learned rules can be removed there."""
    return [
        RuleInfo(
            kind=r.kind,
            rule=r.text,
            layer=la.layer,
            origin=r.origin,
            removable=la.layer == "learned",
            warning=blanket_reason(r.text) if r.kind == "allow" else None,
        )
        for la in layers
        for r in la.rules
    ]


def check_learnable(kind: str, rule: str) -> None:
    """A rule that may be remembered: valid, no blanket allow, no allow whose own text needs a person.
    Raises ValueError saying why not."""
    try:
        parse_rule(rule, kind)  # type: ignore[arg-type]
    except RuleError as e:
        raise ValueError(f"not a valid rule: {e}") from None
    if kind == "allow":
        why = blanket_reason(rule)
        if why:
            raise ValueError(f"{rule!r} is a blanket rule and cannot be remembered: {why}")
        catastrophic = _catastrophic_example(rule)
        if catastrophic:
            raise ValueError(f"{rule!r} would allow a call that always needs a person: {catastrophic}")


def check_grantable(kind: Literal["allow", "deny"], rules: list[str], verdict: Verdict | None) -> None:
    """What ``PolicyStore.learn`` checks, for a grant that is not written to learned.toml (a timed one): a
    call that can never be allowed always, a blanket rule, a rule reaching a call that needs a person.
    Raises ValueError."""
    _refuse_never_learned(kind, verdict, "beyond once")
    for r in rules:
        if _TRUST_RULE.match(r.strip()):
            raise ValueError("trust is given always or not at all, never for a while")
        check_learnable(kind, r.strip())


def _refuse_never_learned(kind: str, verdict: Verdict | None, how: str) -> None:
    if verdict is not None and kind == "allow":
        bad = _NEVER_LEARN & set(verdict.flags)
        if bad:
            raise ValueError(f"this call can never be allowed {how} ({', '.join(sorted(bad))})")


def _catastrophic_example(rule: str) -> str | None:
    """A Bash allow rule whose literal text is itself a call that needs a person (rm -rf /, mkfs ...)."""
    from nexusd.core.policy.rules import split_rule

    try:
        tool, spec = split_rule(rule)
    except RuleError:
        return None
    if tool not in ("Bash", "run_shell_command") or not spec:
        return None
    literal = spec[:-2] if spec.endswith(":*") else spec
    literal = " ".join(w for w in literal.split() if w != "*").replace("*", "")
    if not literal.strip():
        return None
    try:
        from nexusd.core.classify import classify
        from nexusd.core.model import Context, Flag
        from nexusd.policy.filesystem import RealFileSystem
        from nexusd.protocol import CallInfo
    except ImportError:
        return None
    home = os.path.expanduser("~")
    call = CallInfo(provider="other", session="learn", tool="Bash", input={"command": literal}, cwd=home)
    try:
        cls = classify(call, Context(cwd=home, workspace_roots=(home,), home=home), RealFileSystem())
    except Exception:
        return None
    if Flag.CATASTROPHIC in cls.flags:
        return "; ".join(cls.notes) or literal
    return None
