"""How a shell command runs sandboxed: the plan (argv to exec, paths to scrub after) and the agent wrap.

``plan_command`` turns the policy's ``[sandbox]`` settings, the always-protected paths and the probe
into an argv. ``wrap_for_agent`` plans an allowed agent shell call at decision time and rewrites it to
run that plan through a generated ``sh`` script (``nexusd.sandbox.wrapper``): the daemon that decided is
the only source of the plan, its paths and its policy.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform as platform_module
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nexusd.atomicfile import write_atomic
from nexusd.core.classify.paths import CREDENTIAL_PATHS
from nexusd.core.disposition import command_disposition
from nexusd.core.escape import escape_request, how_to_escape
from nexusd.core.model import Classification
from nexusd.core.policy.policy import Policy
from nexusd.core.policy.rules import concrete_path
from nexusd.core.protected import GIT_FILES, HOME_PROTECTED, WORKSPACE_PROTECTED
from nexusd.core.tools import SANDBOXED_SHELL_TOOLS, sandbox_first_applies
from nexusd.core.workspace import workspace_of
from nexusd.policy.filesystem import RealFileSystem, lexists, read_regular_text, same_realpath
from nexusd.policy.sandbox_settings import (
    SandboxSettings,
    sandbox_settings,
)
from nexusd.policy.store import PolicyStore
from nexusd.protocol import CallInfo, SandboxPlanReply, SandboxProbe, Verdict
from nexusd.sandbox import helper_argv
from nexusd.sandbox.bwrap import MountSpec, build_bwrap_argv
from nexusd.sandbox.gitscrub import bare_repo_paths
from nexusd.sandbox.nested import Found, find_protected, resolved
from nexusd.sandbox.probe import detect_platform

# A filtered call's registration with the egress proxy: (command, cwd, workspace, its FIFOs) -> taken
Network = Callable[[str, str, str, tuple[str, str]], bool]

# The protected places, stated once for the gate and the sandbox (``nexusd.core.protected``): bound read-only at
# the top of the workspace and the cwd (AGENT_DIRS, GIT_FILES) and in the home directory (HOME_FILES).
AGENT_DIRS = WORKSPACE_PROTECTED
HOME_FILES = HOME_PROTECTED
WORKSPACE_NAMES = (*GIT_FILES, *AGENT_DIRS)
HOME_NAMES = (*HOME_FILES, *AGENT_DIRS)


PREVIEW_BACKENDS = ("bwrap", "unshare")  # Linux: the overlay helper mounts overlayfs before them


_one_plan = threading.local()  # .real: the paths resolved so far by the plan this thread is making


def _real(p: str) -> str:
    """``p``'s real path; within one ``plan_command`` each path is resolved once (the workspace, the home,
    the masks are asked for by several steps), so every step of one plan sees the same answer."""
    seen: dict[str, str] | None = getattr(_one_plan, "real", None)
    if seen is None:
        return same_realpath(p)
    real = seen.get(p)
    if real is None:
        real = seen[p] = same_realpath(p)
    return real


def _shell() -> str:
    return "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


def _state_dir(store: PolicyStore) -> Path:
    """Absolute even if a caller built the store from a relative path: bwrap and the wrapper run elsewhere."""
    return Path(os.path.abspath(store.state_dir))


def workspace_dir(state_dir: Path, workspace: str) -> Path:
    """``<state>/sandbox/<hash of the workspace>``: its sandbox HOME, TMPDIR and generated wrappers."""
    tag = hashlib.sha256(workspace.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_dir / "sandbox" / tag


def sandbox_dirs(state_dir: Path, workspace: str) -> tuple[str, str]:
    """Per-workspace HOME and TMPDIR, so that what a sandboxed command writes outside the workspace lands here."""
    base = workspace_dir(state_dir, workspace)
    home, tmp = base / "home", base / "tmp"
    for d in (state_dir, state_dir / "sandbox", base, home, tmp):
        d.mkdir(mode=0o700, exist_ok=True, parents=d == state_dir)  # a fresh state dir may not exist yet
    return str(home), str(tmp)


def daemon_dirs(store: PolicyStore) -> list[str]:
    """The daemon's own config, state, managed-policy and socket directories: hidden from every sandbox.

    The store's, never the environment's defaults: the daemon is the only source of its paths (a daemon
    started with ``--config-dir C`` hides C, whatever ``NEXUS_CONFIG_DIR`` says)."""
    dirs = [str(store.config_dir), str(store.state_dir), str(store.managed_dir), *store.protected_dirs]
    return list(dict.fromkeys(_real(os.path.abspath(d)) for d in dirs))


def _rule_path(rule: object, cwd: str, home: str) -> str | None:
    """The concrete path a Read/Edit rule names, or None when it is a glob no single mount can express."""
    pat = getattr(rule, "path", None)
    return None if pat is None else concrete_path(pat, cwd, home)


def policy_write_paths(policy: object, cwd: str, home: str) -> list[str]:
    """Where the permission policy lets the agent write, so that a write the gate allowed does not fail
    inside the sandbox: additional directories (the agent's --add-dir) and the concrete paths of Edit allow
    rules of the person's own layers (a project, trusted or not, only narrows the sandbox)."""
    out = list(getattr(policy, "additional_directories", ()) or ())
    for rule in getattr(policy, "rules", ()) or ():
        if getattr(rule, "kind", None) != "allow" or getattr(rule, "tool", None) not in ("Edit", "Write", "MultiEdit"):
            continue
        if getattr(rule, "project", False):
            continue  # a project only narrows the sandbox: its Edit rules widen the gate (when trusted), not this
        path = _rule_path(rule, cwd, home)
        if path is not None and path != "/":
            out.append(path)
    return out


def worktree_common_dir(workspace: str) -> str | None:
    """A linked worktree's shared repository (``.git`` is a file naming ``<main>/.git/worktrees/<name>``):
    commits write objects and refs there, so it must be writable — its hooks and config stay protected."""
    dotgit = os.path.join(workspace, ".git")
    if not os.path.isfile(dotgit):
        return None
    try:  # both files are the agent's to shape: regular files only (a FIFO would block the daemon)
        line = read_regular_text(dotgit, 4096).strip()
        if not line.startswith("gitdir:"):
            return None
        gitdir = os.path.normpath(os.path.join(workspace, line[7:].strip()))
        common = read_regular_text(os.path.join(gitdir, "commondir"), 4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return _real(os.path.normpath(os.path.join(gitdir, common)))


def policy_deny_paths(policy: object, cwd: str, home: str) -> tuple[list[str], list[str]]:
    """Read/Edit deny rules of the permission policy that name concrete paths, as (deny_read, deny_write).

    Anchors are the permission rules' own (``//abs``, ``~/``, ``/`` = the policy file's directory, ``./``
    or bare = the cwd). Glob rules that name no single path stay enforced by the permission gate only.
    """
    reads: list[str] = list(getattr(policy, "sandbox_deny_read", ()) or ())
    writes: list[str] = list(getattr(policy, "sandbox_deny_write", ()) or ())
    for rule in getattr(policy, "rules", ()) or ():
        if getattr(rule, "kind", None) != "deny" or getattr(rule, "tool", None) not in ("Read", "Edit", "Write"):
            continue
        path = _rule_path(rule, cwd, home)
        if path is not None:
            (reads if rule.tool == "Read" else writes).append(path)
    return reads, writes


@dataclass(frozen=True)
class Layout:
    spec: MountSpec
    scrub: list[str]
    nested_roots: tuple[str, ...] = ()  # writable roots walked for nested protected paths
    nested_before: tuple[str, ...] = ()  # what that walk found (bound read-only)
    notes: tuple[str, ...] = ()


def build_layout(
    cwd: str,
    workspace: str,
    settings: SandboxSettings,
    *,
    hidden_dirs: Iterable[str],
    extra_deny_read: Iterable[str] = (),
    extra_deny_write: Iterable[str] = (),
    extra_writable: Iterable[str] = (),
    home: str,
    sandbox_home: str,
    sandbox_tmp: str,
    scan: Callable[[str], Found] = find_protected,
) -> Layout:
    """The mounts for one command, from existing paths only, and what to scrub after it. ``scan``: the
    nested-path search (``plan_command`` shares one answer per root between this and ``secret_masks``)."""
    cwd, workspace = _real(cwd), _real(workspace)
    common = worktree_common_dir(workspace)
    writable = [workspace, *(_real(p) for p in (*settings.allow_write, *extra_writable))]
    if common is not None:
        writable.append(common)
    writable = [p for p in dict.fromkeys(writable) if os.path.exists(p)]
    roots, below = frozenset(writable), tuple(w.rstrip("/") + "/" for w in writable)

    def in_writable(p: str) -> bool:
        return p in roots or p.startswith(below)

    protected_ro: list[str] = []
    scrub: list[str] = []
    candidates: list[str] = []
    for root in dict.fromkeys((workspace, cwd)):
        candidates += _joined(root, WORKSPACE_NAMES)
    candidates += _joined(home, HOME_NAMES)
    if common is not None:
        candidates += _joined(common, ("hooks", "config"))
    existing_bare, missing_bare = bare_repo_paths(cwd)
    candidates += existing_bare
    for p in dict.fromkeys(candidates):
        if lexists(p):
            protected_ro.append(p)
            rp = _real(p)
            if rp != p:
                protected_ro.append(rp)  # a symlinked .git/hooks must not be writable through its target
        elif in_writable(p):
            scrub.append(p)
    scrub += [p for p in missing_bare if in_writable(p) and p not in scrub]
    # nexusd's own code and interpreter run outside the sandbox (the next hook, the scrub, a restart): where
    # they lie below a writable root (a checkout or a venv in the workspace), they are read-only inside
    protected_ro += [p for p in own_install() if in_writable(p)]
    nested: list[str] = []  # each protected path, and its realpath after it when a symlink's differs
    notes: list[str] = []
    for root in writable:
        found = scan(root)
        nested += resolved(found)
        if not found.complete:
            notes.append(
                f"{root} is too large to search whole for nested protected paths (.git/hooks, agent "
                "settings ...): some below it may stay writable"
            )
    protected_ro += dict.fromkeys(nested)

    def existing(paths: Iterable[str]) -> list[str]:
        # (a name that is not there resolves to a place that is not there: only what exists is resolved)
        return [r for r in dict.fromkeys(_real(p) for p in paths if lexists(p)) if lexists(r)]

    spec = MountSpec(
        cwd=cwd,
        writable=tuple(writable),
        read_only=tuple(existing((*settings.deny_write, *extra_deny_write))),
        masked=tuple(existing((*settings.deny_read, *extra_deny_read))),
        revealed=tuple(existing(settings.allow_read)),
        protected_ro=tuple(dict.fromkeys(protected_ro)),
        protected_masked=tuple(existing(hidden_dirs)),
        own=(sandbox_home, sandbox_tmp),
        env=(("HOME", sandbox_home), ("TMPDIR", sandbox_tmp)),
        network=not settings.network_isolation,
    )
    found_paths = (p for root in writable for p in scan(root).paths)
    return Layout(spec, scrub, tuple(writable), tuple(dict.fromkeys(found_paths)), tuple(notes))


@functools.lru_cache(maxsize=64)
def _joined(root: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """``root``'s protected names as paths: the same few roots on every call (the workspace, the home)."""
    return tuple(os.path.join(root, name) for name in names)


@functools.cache
def own_install() -> tuple[str, ...]:
    """The directories of nexusd's and its hook's packages and of the interpreter that runs them (real
    paths). Found without importing ``nexus_clients`` (the sandbox layer does not depend on the clients)."""
    import importlib.util

    import nexusd

    dirs = [os.path.dirname(os.path.abspath(nexusd.__file__)), os.path.dirname(os.path.abspath(sys.executable))]
    spec = importlib.util.find_spec("nexus_clients")
    if spec is not None and spec.submodule_search_locations:
        dirs += list(spec.submodule_search_locations)
    return tuple(r for r in dict.fromkeys(_real(d) for d in dirs) if os.path.isdir(r))


def runner_plan(
    command: str, cwd: str, store: PolicyStore, probe: SandboxProbe | None, session: str | None, workspace: str | None
) -> tuple[SandboxPlanReply, tuple[str, str] | None]:
    """``plan_command`` for ``nexusctl run``, with a filtered plan's FIFOs made (``wrapper.port_fifos``): in
    the decision pool; the daemon registers them with its proxy on the loop."""
    from nexusd.sandbox.wrapper import RUN_DIR, port_fifos, ports_planned

    plan = plan_command(command, cwd, store, probe, session, workspace=workspace)
    if not plan.allowed or not ports_planned(plan):
        return plan, None
    run_dir = workspace_dir(_state_dir(store), _real(workspace or cwd)) / RUN_DIR
    try:
        run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return plan, None
    return plan, port_fifos(run_dir, secrets.token_hex(12))


def plan_command(
    command: str,
    cwd: str,
    store: PolicyStore,
    probe: SandboxProbe | None,
    session: str | None = None,
    *,
    workspace: str | None = None,
) -> SandboxPlanReply:
    """Never raises for bad input: a refusal says why."""
    if getattr(_one_plan, "real", None) is not None:  # (a plan within a plan: the outer one's answers)
        return _plan_command(command, cwd, store, probe, session, workspace=workspace)
    _one_plan.real = {}
    try:
        return _plan_command(command, cwd, store, probe, session, workspace=workspace)
    finally:
        _one_plan.real = None


def _plan_command(
    command: str,
    cwd: str,
    store: PolicyStore,
    probe: SandboxProbe | None,
    session: str | None,
    *,
    workspace: str | None,
) -> SandboxPlanReply:
    if not os.path.isabs(cwd) or not os.path.isdir(cwd):
        return SandboxPlanReply(allowed=False, reason=f"cwd {cwd!r} is not an existing absolute directory")
    ws = workspace or cwd
    if not os.path.isabs(ws) or not os.path.isdir(ws):
        return SandboxPlanReply(allowed=False, reason=f"workspace {ws!r} is not an existing absolute directory")
    # The workspace's policy (global + its trusted project layers), as the gate uses for the same call.
    policy = store.policy_for(_real(ws))
    try:
        settings = sandbox_settings(policy)
    except ValueError as e:
        return SandboxPlanReply(allowed=False, reason=f"sandbox settings are invalid: {e}")
    if "\x00" in command:
        return SandboxPlanReply(allowed=False, reason="the command contains a NUL byte")
    from nexusd.sandbox.network import has_rule_domains

    net_mode = settings.network(has_rule_domains(policy, settings))
    settings = replace(settings, network_isolation=net_mode != "open")
    inner = [_shell(), "-c", command]
    backend = probe.backend if probe is not None and probe.available else None
    if backend not in ("bwrap", "unshare", "seatbelt"):
        why = probe.reason if probe is not None else "the sandbox was not probed"
        if settings.fail_if_unavailable:
            return SandboxPlanReply(
                allowed=False,
                reason=f"no sandbox is available ({why}); refusing to run unsandboxed "
                "(set [sandbox] fail_if_unavailable = false to allow it)",
            )
        return SandboxPlanReply(allowed=True, argv=inner, backend=None, reason=f"running UNSANDBOXED: {why}")
    sandbox_home, sandbox_tmp = sandbox_dirs(_state_dir(store), _real(ws))
    home = os.path.expanduser("~")
    deny_read, deny_write = policy_deny_paths(policy, _real(cwd), home)
    # before any scan: a mount point made after the plan's one search of a root looks planted (and the
    # search's result is reused for the layout below)
    home_placeholders(home, sandbox_home)
    scans: dict[str, Found] = {}  # one search (and one freshness check) per root for this plan

    def scan(root: str) -> Found:
        found = scans.get(root)
        if found is None:
            found = scans[root] = find_protected(root)
        return found

    secrets = secret_masks(_real(ws), home, scan=scan)
    deny_read = [*deny_read, *secrets]
    # No allow_read (user, managed or project) re-opens a built-in secret mask or anything inside one:
    # sandboxed calls run without a person, and a read by one and a send by the next is how secrets
    # leave. Reading one takes a person's allow of a call outside the sandbox (an escape).
    settings = replace(
        settings,
        allow_read=tuple(r for r in settings.allow_read if not any(r == m or r.startswith(m + "/") for m in secrets)),
    )
    layout = build_layout(
        cwd,
        ws,
        settings,
        hidden_dirs=daemon_dirs(store),
        extra_deny_read=deny_read,
        extra_deny_write=deny_write,
        extra_writable=policy_write_paths(policy, _real(cwd), home),
        home=home,
        sandbox_home=sandbox_home,
        sandbox_tmp=sandbox_tmp,
        scan=scan,
    )
    layout = replace(
        layout,
        spec=replace(
            layout.spec,
            mask_file=mask_file(_state_dir(store)),
            home_files=home_config_binds(home, sandbox_home, (*layout.spec.masked, *layout.spec.protected_masked)),
        ),
    )
    platform = probe.platform if probe is not None else detect_platform()
    state: dict[str, Any] = {
        "transparent": settings.active_on(platform),
        "auto_allow": settings.active_on(platform) and settings.auto_allow_bash_if_sandboxed,
        "network": "open" if layout.spec.network else "isolated",
    }
    if backend == "bwrap":
        bwrap = shutil.which("bwrap") or "bwrap"
        full = probe is not None and probe.checks.get("bwrap") == "ok"
        spec, ports = _network_section(net_mode, layout.spec, settings)
        if ports:
            state["network"] = "filtered"
        writable = (*layout.nested_roots, sandbox_home, sandbox_tmp)
        named = _named_sockets(settings, probe, writable)
        run = loader_argv(inner) if named.paths else inner
        argv = build_bwrap_argv(bwrap, spec, run, full=full, layer_file=_layer_writer(_state_dir(store)), outer=ports)
        argv, note = _unix_socket_filter(argv, settings, probe, _state_dir(store), named)
        return SandboxPlanReply(
            allowed=True,
            argv=argv,
            backend="bwrap",
            scrub=layout.scrub,
            reason="; ".join(n for n in (note, *layout.notes) if n),
            scrub_below=list(layout.nested_roots),
            protected_before=list(layout.nested_before),
            unix_sockets=("named" if named.paths else "closed") if "--seccomp" in argv else "open",
            **state,
        )
    if backend == "seatbelt":
        from nexusd.sandbox.seatbelt import build_seatbelt_argv

        # no bridge on macOS yet: a filtered network is no network there (the profile denies it)
        argv = build_seatbelt_argv(layout.spec, inner, unix_sockets=settings.allow_all_unix_sockets)
        return SandboxPlanReply(
            allowed=True,
            argv=argv,
            backend="seatbelt",
            scrub=layout.scrub,
            reason="; ".join(n for n in (probe.reason if probe else "", *layout.notes) if n),
            scrub_below=list(layout.nested_roots),
            protected_before=list(layout.nested_before),
            unix_sockets="open" if settings.allow_all_unix_sockets else "closed",
            **state,
        )
    from nexusd.sandbox.unshare import build_unshare_argv

    argv = build_unshare_argv(layout.spec, inner)
    net_note = (
        "filtered networking needs bubblewrap: the unshare fallback runs with no network"
        if net_mode == "filtered"
        else ""
    )
    return SandboxPlanReply(
        allowed=True,
        argv=argv,
        backend="unshare",
        scrub=layout.scrub,
        reason="; ".join(n for n in (probe.reason if probe else "", net_note, *layout.notes) if n),
        scrub_below=list(layout.nested_roots),
        protected_before=list(layout.nested_before),
        unix_sockets="open",
        **state,
    )


def _network_section(mode: str, spec: MountSpec, settings: SandboxSettings) -> tuple[MountSpec, list[str]]:
    """``filtered``: no route out of the sandbox's network namespace (``--unshare-net`` stays), the proxy
    variables in the command's environment, and the outer bubblewrap's words that let the daemon make the
    proxy's ports on the sandbox's loopback before the command starts (``nexusd.sandbox.netjoin``)."""
    if mode != "filtered":
        return spec, []
    from nexusd.sandbox.netjoin import bwrap_words
    from nexusd.sandbox.network import proxy_env

    return replace(spec, network=False, env=(*spec.env, *proxy_env(settings))), bwrap_words()


def secret_masks(workspace: str, home: str, *, scan: Callable[[str], Found] = find_protected) -> list[str]:
    """The built-in deny_read that exist: credential locations and the workspace's .env files. Final: no
    allow_read re-opens them (see ``plan_command``)."""
    found = [os.path.join(home, rel) for rel in CREDENTIAL_PATHS]
    found += scan(workspace).secrets  # .env files at any depth (not templates)
    return list(dict.fromkeys(_real(p) for p in found if lexists(p)))


LAYER_FILES_KEPT_S = 3600.0  # a layer file unused this long is removed (a big tree's plans change with it)
_layer_writes = 0


def _layer_writer(state_dir: Path) -> Callable[[bytes], str]:
    """Where a bubblewrap layer's arguments go (``bwrap.build_bwrap_argv``): content-addressed under the
    state directory's ``sandbox/``, written once, atomically (a temporary name per writer). A file used
    again is touched, and every 64 writes the files unused for an hour are removed: a tree that keeps
    changing makes a new file per change, and they must not pile up."""

    def write(data: bytes) -> str:
        global _layer_writes
        directory = state_dir / "sandbox"
        path = directory / f"layer-{hashlib.sha256(data).hexdigest()[:24]}.args"
        _layer_writes += 1
        if _layer_writes % 64 == 0:
            _clean_layer_files(directory, keep=path.name)
        try:
            os.utime(path)  # in use (first, so a cleaner that looks now keeps it)
            if path.read_bytes() == data:
                return str(path)
        except OSError:
            pass
        write_atomic(path, data.decode("utf-8", "surrogateescape"), durable=False, errors="surrogateescape")
        return str(path)

    return write


def _clean_layer_files(directory: Path, *, keep: str = "", now: float | None = None) -> int:
    """Remove the layer files not used for ``LAYER_FILES_KEPT_S``; how many went. Never fails a plan."""
    limit = (time.time() if now is None else now) - LAYER_FILES_KEPT_S
    gone = 0
    try:
        names = [n for n in os.listdir(directory) if n.startswith("layer-") and n.endswith(".args") and n != keep]
    except OSError:
        return 0
    for name in names:
        try:
            if os.lstat(directory / name).st_mtime < limit:
                os.unlink(directory / name)
                gone += 1
        except OSError:
            continue
    return gone


@dataclass(frozen=True)
class NamedSockets:
    """``allow_unix_sockets`` as this plan can open them: ``paths`` through the supervisor, ``notes`` for
    the ones it cannot."""

    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _named_sockets(settings: SandboxSettings, probe: SandboxProbe | None, writable: Iterable[str]) -> NamedSockets:
    """The named sockets the supervisor may connect (nexusd/sandbox/unixsup.py). Not one that lies in, or is
    reached through, a root the command may write: it could put a symlink there to any other socket, and
    the supervisor connects in the host's file system."""
    from nexusd.sandbox.seccomp import ARCHES

    if not settings.allow_unix_sockets or settings.allow_all_unix_sockets:
        return NamedSockets()
    if probe is None or probe.checks.get("seccomp") != "ok":
        return NamedSockets()  # no filter at all: said by _unix_socket_filter
    if platform_module.machine() not in ARCHES or not sys.platform.startswith("linux"):
        return NamedSockets(notes=(f"allow_unix_sockets: no supervisor for {platform_module.machine()}",))
    roots = [w.rstrip("/") for w in writable if w]

    def below(p: str) -> bool:
        return any(p == r or p.startswith(r + "/") for r in roots)

    paths: list[str] = []
    notes: list[str] = []
    for path in settings.allow_unix_sockets:
        lexical = os.path.normpath(path)
        if not os.path.isabs(lexical):
            notes.append(f"allow_unix_sockets: {path} is not an absolute path: it stays closed")
        elif below(lexical) or below(_real(lexical)):
            notes.append(f"allow_unix_sockets: {path} lies where the command may write: it stays closed")
        else:
            paths.append(lexical)
    return NamedSockets(tuple(dict.fromkeys(paths)), tuple(notes))


def loader_argv(inner: list[str]) -> list[str]:
    """The supervisor's loader in front of the command, inside the sandbox (``unixsup.load``): the base
    interpreter without ``site``, the source and the notifying filter as words."""
    from nexusd.sandbox.seccomp import notify_filter
    from nexusd.sandbox.unixsup import PLACEHOLDER

    program = notify_filter(platform_module.machine()).hex()
    return [*helper_argv("unixsup"), "load", PLACEHOLDER, program, "--", *inner]


def _unix_socket_filter(
    argv: list[str],
    settings: SandboxSettings,
    probe: SandboxProbe | None,
    state_dir: Path,
    named: NamedSockets = NamedSockets(),
) -> tuple[list[str], str]:
    """Close host Unix sockets with the seccomp filter unless the policy opens them all, and put the
    supervisor around bubblewrap when it names some; say what is left."""
    from nexusd.sandbox.seccomp import filter_file, split_filter, with_filter

    if settings.allow_all_unix_sockets:
        return argv, "allow_all_unix_sockets: the command can connect to the host's Unix sockets"
    if probe is None or probe.checks.get("seccomp") != "ok":
        why = probe.checks.get("seccomp", "not probed") if probe is not None else "not probed"
        return argv, f"no seccomp filter ({why}): the command can connect to the host's Unix sockets"
    try:
        path = filter_file(state_dir, named=bool(named.paths))
    except (OSError, ValueError) as e:
        return argv, f"no seccomp filter (cannot write it: {e}): the command can connect to the host's Unix sockets"
    notes = list(named.notes)
    wrapped = with_filter(argv, path)
    if named.paths:
        head = len(wrapped) - len(split_filter(wrapped)[1])  # the shell that opens the filter on descriptor 3
        supervisor = [*helper_argv("unixsup"), "supervise", *named.paths, "--"]
        wrapped = [*wrapped[:head], *supervisor, *wrapped[head:]]
        notes.insert(0, "host Unix sockets are closed except " + ", ".join(named.paths) + " (nexusd's supervisor)")
    return wrapped, "; ".join(notes)


# --------------------------------------------------------------------------- excluded commands


# excluded_commands (``command_disposition``) and their matcher live in nexusd/core/disposition.py: the
# gate asks them too.


# --------------------------------------------------------------------------- transparent sandboxing


def wrap_for_agent(
    call: CallInfo,
    verdict: Verdict,
    store: PolicyStore,
    probe: SandboxProbe | None,
    *,
    policy: Policy | None = None,
    socket: str | None = None,
    network: Network | None = None,
    cls: Classification | None = None,
    by_person: bool = False,
) -> dict[str, object] | None:
    """The updated tool input that runs an allowed shell call sandboxed, or None to run it as is.

    ``policy`` is the one the gate decided with; without it (a person's answer) it is looked up again.
    ``cls``: the request's classification, whose shell parse is reused (None: the command is parsed).
    ``socket``: the deciding daemon's own socket; the wrapper refuses to run once it is gone.
    ``network(command, cwd, workspace, fifos)``: for a filtered network, registers the call with the proxy,
    which serves its FIFOs (False, or no callback: the command runs with no network).
    ``by_person``: a person answered this call's ask with allow (``verdict`` is then the ask): only that
    lets an escape request run outside the sandbox; anything else a person allows still runs sandboxed
    (a mixed excluded chain too: its ask said so). The two halves,
    ``prepare_wrap`` (the file system: off the daemon's loop) and ``PreparedWrap.finish`` (the network
    context: the daemon's state), in one call."""
    prepared = prepare_wrap(call, verdict, store, probe, policy=policy, socket=socket, cls=cls, by_person=by_person)
    if isinstance(prepared, PreparedWrap):
        return prepared.finish(network)
    return prepared


@dataclass(frozen=True)
class PreparedWrap:
    """An allowed call's sandbox plan and the agent's text, made where file-system questions may be slow
    (the decision pool); ``finish`` adds what only the daemon's loop may touch (the egress proxy's
    registration of a filtered call's FIFOs)."""

    tool_input: dict[str, Any]
    key: str
    command: str
    cwd: str
    workspace: str  # resolved (here, in the pool: the loop asks no file system)
    text: str  # the agent's text (``wrapper.agent_command``), its files written already
    ports: tuple[str, str] | None = None  # a filtered call's FIFOs (``wrapper.port_fifos``): info, go

    def finish(self, network: Network | None) -> dict[str, object]:
        """The agent's input. A filtered call's FIFOs go to the proxy (``network``), which makes its ports
        once bubblewrap reports; when it cannot take them they are removed, and the wrapper, finding none,
        runs the command with no network."""
        if self.ports is not None:
            taken = network is not None and network(self.command, self.cwd, self.workspace, self.ports)
            if not taken:
                for path in self.ports:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
        return {**self.tool_input, self.key: self.text}


def wraps(call: CallInfo, policy: Policy, probe: SandboxProbe | None) -> bool:
    """Whether an allowed ``call`` under ``policy`` is planned at all: ``prepare_wrap``'s first checks, which
    ask no file system, so the daemon can skip the pool when the sandbox is off. True when unsure."""
    if SANDBOXED_SHELL_TOOLS.get(call.tool) is None:
        return False
    if probe is None:
        return True
    try:
        settings = sandbox_settings(policy)
    except ValueError:
        return True  # broken settings: planned with defaults (fail closed)
    if not settings.active_on(probe.platform) or not sandbox_first_applies(call.provider, settings.enabled_set):
        return False
    return probe.available or settings.fail_if_unavailable


def prepare_wrap(
    call: CallInfo,
    verdict: Verdict,
    store: PolicyStore,
    probe: SandboxProbe | None,
    *,
    policy: Policy | None = None,
    socket: str | None = None,
    cls: Classification | None = None,
    by_person: bool = False,
) -> dict[str, object] | PreparedWrap | None:
    """``wrap_for_agent`` up to the network context: None (run as is), a finished input (a refusal), or
    the plan to ``finish``. Touches no daemon state: safe in a worker thread."""
    key = SANDBOXED_SHELL_TOOLS.get(call.tool)
    if (verdict.decision != "allow" and not by_person) or key is None:
        return None
    command = call.input.get(key)
    if not isinstance(command, str):
        return None
    try:
        # The same policy the gate decided with (global + this workspace's trusted project layers): an
        # allow granted because the call runs sandboxed must be wrapped by the same settings.
        if policy is None:
            policy = store.policy_for(workspace_of(call, RealFileSystem()))
        settings = sandbox_settings(policy)
    except ValueError:  # broken settings: sandbox with defaults (fail closed)
        settings = SandboxSettings(enabled=True, enabled_set=True)
    if not settings.active_on(probe.platform if probe is not None else detect_platform()):
        return None
    if not sandbox_first_applies(call.provider, settings.enabled_set):  # its hook cannot take the rewrite
        return None
    if (probe is None or not probe.available) and settings.gate_only_when_unavailable():
        # sandbox-first by default, but no working sandbox here: gate-only (the default's fallback), or
        # the policy allows unsandboxed runs (fail_if_unavailable = false); the wrapper would only warn
        return None
    if by_person and escape_request(call.input, command) is not None:
        return None  # the agent asked to run it outside the sandbox, and a person allowed exactly that
    parsed = (tuple(c.argv for c in cls.commands), cls.flags) if cls is not None and cls.commands else None
    if command_disposition(command, settings, parsed=parsed) == "unsandboxed":
        return None  # every sub-command is excluded (and allowed outside the sandbox); a mixed chain runs
        # inside, even after a person's allow: that is what its ask said (a chain is never less sandboxed)
    from nexusd.sandbox.wrapper import (
        RUN_DIR,
        agent_command,
        known_dirs_file,
        port_fifos,
        ports_planned,
        refusal_command,
    )

    ws = call.workspace or call.cwd
    cwd = call.cwd or ws
    if not ws or not cwd or not os.path.isabs(ws) or not os.path.isabs(cwd):
        if not settings.fail_if_unavailable:
            return None
        return {**call.input, key: refusal_command("the call names no absolute workspace to sandbox it in")}
    # Planned now, by the daemon that decided: the agent runs this plan, with no second round trip.
    planned_at = time.time()
    plan = plan_command(command, cwd, store, probe, call.session, workspace=ws)
    preview: dict[str, object] | None = None
    if settings.preview and plan.allowed:
        if plan.backend not in PREVIEW_BACKENDS:  # never run it on the real workspace instead
            return {
                **call.input,
                key: refusal_command(
                    "[sandbox] preview is on, and previewing needs the Linux sandbox (bubblewrap or unshare) with "
                    f"overlayfs; this machine's sandbox is {plan.backend or 'not available'}"
                ),
            }
        preview = {
            "workspace": _real(ws),
            "parent": str(workspace_dir(_state_dir(store), _real(ws)) / "preview"),
            "socket": socket,
            "provider": call.provider,
            "session": call.session,
            "cwd": cwd,
        }
    if plan.allowed and plan.backend is None:
        return None  # unavailable, and the policy allows unsandboxed runs
    run_dir = workspace_dir(_state_dir(store), _real(ws)) / RUN_DIR
    try:
        known = known_dirs_file(plan, run_dir)
    except OSError:
        known = None  # the epilogue walks the whole tree
    tag = secrets.token_hex(12)
    ports = port_fifos(run_dir, tag) if plan.allowed and ports_planned(plan) else None
    text = agent_command(
        plan,
        command,
        run_dir,
        socket=socket,
        escape_hint=how_to_escape(call.tool),
        known=known,
        now=planned_at,
        session=call.session,
        preview=preview,
        tag=tag,
    )
    return PreparedWrap(dict(call.input), key, command, cwd, _real(ws), text, ports)


# --------------------------------------------------------------------------- masks and the sandbox's HOME

# The user's configuration that tools look up in $HOME and that holds no secret by itself: bound read-only
# into the sandbox's own HOME (git's identity and aliases, ignore files, formatters' settings). Credential
# locations are never on it (``CREDENTIAL_PATHS``); a file here that a policy masks is left out.
HOME_CONFIG = (
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
    ".config/git/attributes",
    ".gitignore_global",
    ".editorconfig",
    ".config/ruff",
    ".config/black",
    ".prettierrc",
    ".prettierrc.json",
    ".clang-format",
    ".config/yapf",
    ".config/flake8",
    ".pycodestyle",
)


def mask_file(state_dir: Path) -> str:
    """``<state>/sandbox/empty``: an empty regular file, bound read-only over every masked file.

    Recreated (atomically) when it is anything but an empty regular file, so a mask never shows content."""
    path = state_dir / "sandbox" / "empty"
    try:
        st = os.lstat(path)
        if st.st_size == 0 and (st.st_mode & 0o170000) == 0o100000:
            return str(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".empty.{os.getpid()}.{secrets.token_hex(6)}.tmp")  # each writer its own (threads)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    os.close(fd)
    os.replace(tmp, path)
    return str(path)


def home_placeholders(home: str, sandbox_home: str) -> None:
    """Create, in the sandbox HOME, the mount points of the ``HOME_CONFIG`` entries that exist: when the
    sandbox HOME lies inside a writable root (a workspace that holds the state directory, such as the
    home itself), a mount point bubblewrap created during the command would be taken for a planted
    protected file and scrubbed. Never through a symlink (the sandbox HOME is the sandbox's to shape)."""
    own = _real(sandbox_home)
    for rel in HOME_CONFIG:
        src = os.path.join(home, rel)
        dst = os.path.join(own, rel)
        if not os.path.exists(src) or os.path.lexists(dst):
            continue
        parent = os.path.dirname(dst)
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
            if _real(parent) != parent:
                continue
            if os.path.isdir(src):
                os.mkdir(dst, 0o700)
            else:
                os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except OSError:
            continue  # no placeholder: bubblewrap makes the mount point itself (scrubbed after, at worst)


def home_config_binds(home: str, sandbox_home: str, masked: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(real file, its place in the sandbox's HOME) for the ``HOME_CONFIG`` entries that exist, are not
    credentials and are not masked (by their path or their symlink's target). Each is readable inside at
    its own path already; this only puts it where tools look. A destination whose parent the sandbox
    turned into a symlink (the sandbox HOME is writable) is left out rather than followed."""
    present = [rel for rel in HOME_CONFIG if os.path.exists(os.path.join(home, rel))]
    if not present:
        return ()  # (no realpath of every mask and credential path, on every call, for nothing)
    # (only what exists: an existing file's real path cannot be, or lie below, a path that does not exist;
    # most credential paths are absent, and resolving a missing one costs several system calls)
    refused = [_real(m) for m in (*masked, *(os.path.join(home, c) for c in CREDENTIAL_PATHS)) if lexists(m)]
    own = _real(sandbox_home)
    out: list[tuple[str, str]] = []
    for rel in present:
        src = os.path.join(home, rel)
        real = _real(src)
        if any(real == m or real.startswith(m.rstrip("/") + "/") for m in refused):
            continue
        dst = os.path.join(own, rel)
        parent = os.path.dirname(dst)
        if os.path.islink(dst):
            try:
                os.unlink(dst)  # the sandbox's own file: a planted link must not steer the bind
            except OSError:
                continue
        if os.path.lexists(parent) and _real(parent) != parent:
            continue
        if not _real(parent).startswith(own.rstrip("/") + "/") and _real(parent) != own:
            continue
        out.append((real, dst))
    return tuple(out)
