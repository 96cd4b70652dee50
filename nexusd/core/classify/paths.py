"""Where a path really points: canonical form, workspace boundary, symlink escapes, protected places.

The workspace-boundary and symlink-escape checks (a resolved path must stay under the workspace root, and a
link inside it must not lead out), made to work for files that do not exist yet: the canonical form is the
realpath of the deepest existing ancestor plus the rest, normalised. All file-system facts come from the
injected ``FileSystem``.
"""

from __future__ import annotations

import functools
import posixpath
import re

import msgspec

from nexusd.core.model import Context, FileSystem
from nexusd.protocol import PATH_MAX

# Directory names that hold code or settings something runs later; a write anywhere inside is protected.
# The floor is sandbox-runtime's and Claude Code's lists; the agents' own settings directories (an agent
# rewriting its hook configuration is a known bypass) and build tools' configuration that runs code on the
# next build are added.
PROTECTED_DIR_NAMES = frozenset(
    {
        ".git",
        ".claude",
        ".gemini",
        ".codex",
        ".nexus",
        ".vscode",
        ".idea",
        ".husky",
        ".cursor",
        ".copilot",
        ".opencode",
        ".devcontainer",
        ".cargo",
        ".mvn",
        ".continue",
        ".windsurf",
        ".zed",
        ".yarn",  # Claude Code's list: .yarn/plugins and .yarn/releases run on the next yarn call
    }
)
# File names that a shell, git or direnv executes or obeys later, wherever they are.
PROTECTED_FILE_NAMES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        ".logout",
        ".inputrc",
        ".envrc",
        ".gitconfig",
        ".bash_aliases",
        # run or obeyed on the next start, commit, install or build without anyone asking
        ".gitmodules",
        ".gitattributes",
        ".ripgreprc",
        ".mcp.json",
        ".claude.json",
        "opencode.json",
        "opencode.jsonc",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pnpmfile.cjs",
        ".pre-commit-config.yaml",
        ".lefthook.yml",
        "lefthook.yml",
        "gradlew",
        "gradlew.bat",
        "mvnw",
        "mvnw.cmd",
        "gradle-wrapper.properties",
        ".pypirc",
        ".netrc",
        # the rest of Claude Code's protected files (permission-modes, "Protected paths")
        ".pnp.cjs",
        ".pnp.loader.mjs",
        "bunfig.toml",
        ".bunfig.toml",
        ".bazelrc",
        ".bazelversion",
        ".bazeliskrc",
        "lefthook.yaml",
        ".lefthook.yaml",
        "maven-wrapper.properties",
        ".devcontainer.json",
        "pyrightconfig.json",
    }
)
# Relative to the home directory.
PROTECTED_HOME = (
    ".ssh",
    ".config/git",
    ".config/fish",
    ".config/nexus",
    ".gnupg",
    ".aws",
    ".kube",
    ".docker",
    ".config/systemd",
    ".config/autostart",
    ".config/opencode",
    ".config/environment.d",
    ".local/bin",
    ".local/share/applications",
    "Library/LaunchAgents",
    ".github/hooks",
    ".config/pip",
    ".config/powershell",
    ".local/share/powershell",
)  # pwsh's profiles and modules load on start
# Where credentials live (home-relative). Never "inside the workspace" for the mode, even when the workspace
# is the home directory: reading one needs a person (or an explicit rule). The sandbox masks the same list.
CREDENTIAL_PATHS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".config/hub",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".config/op",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".claude.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
)
# Two-component places inside any directory: Copilot CLI loads hooks from .github/hooks/*.json and hooks and
# permissions from .github/copilot/settings*.json (a bare .github is workflows and templates, not protected).
PROTECTED_SUBPATHS = ((".github", "hooks"), (".github", "copilot"), (".config", "git"))  # + Claude Code's list
PROTECTED_SYSTEM = (
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/zsh",
    "/etc/environment",
    "/etc/github-copilot",
    "/etc/cursor",
    "/etc/gitconfig",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/var/spool/cron",
    "/etc/ld.so.preload",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/systemd",
    "/etc/ssh",
)

_GLOB = re.compile(r"[*?\[]")
# any expansion bash performs: $NAME, ${NAME}, ${NAME:-x} and other operators, $1, $@, $$, $?, $(...)
_VAR = re.compile(r"\$[{(A-Za-z_0-9@*#?$!-]")


class PathInfo(msgspec.Struct, frozen=True):
    """One path argument, resolved."""

    raw: str
    path: str  # canonical absolute path ("" when it could not be resolved statically)
    inside: bool  # inside some workspace root
    symlink_escape: bool = False  # lexically inside, but a symlink takes it outside
    protected: bool = False
    unresolved: bool = False  # depends on a variable or another user's home: we cannot know


def expand_user(raw: str, home: str) -> str | None:
    """``~`` / ``~/x`` / ``$HOME/x`` / ``${HOME}/x`` -> absolute; None for other variables or ``~user``."""
    if raw.startswith("~"):
        head, sep, tail = raw.partition("/")
        if head != "~":
            return None
        raw = home + sep + tail if sep else home
    elif raw.startswith(("$HOME", "${HOME}")):
        rest = raw[5:] if raw.startswith("$HOME") else raw[7:]
        if rest and not rest.startswith("/"):
            return None
        raw = home + rest
    if "$" in raw and _VAR.search(raw):
        return None
    return raw


def join(a: str, b: str) -> str:
    """``posixpath.join(a, b)`` for two strings, without its generality: it is on every word's way."""
    if b.startswith("/"):
        return b
    return a + b if not a or a.endswith("/") else a + "/" + b


def _split(path: str) -> tuple[str, str]:
    """``posixpath.split`` of a string, without its generality."""
    i = path.rfind("/") + 1
    head, tail = path[:i], path[i:]
    if head and head != "/" * len(head):
        head = head.rstrip("/")
    return head, tail


def _canonical(path: str, fs: FileSystem) -> str:
    """realpath of the deepest existing ancestor, then the missing rest normalised on top of it."""
    missing: list[str] = []
    cur = path
    # optional (DecisionFileSystem): both questions at once, one syscall fewer for a path that exists
    both = getattr(fs, "realpath_if_lexists", None)
    for _ in range(4096):
        if both is not None and cur != "/":
            base = both(cur)
        else:
            base = fs.realpath(cur) if cur == "/" or fs.lexists(cur) else None
        if base is not None:
            return posixpath.normpath(posixpath.join(base, *reversed(missing))) if missing else base
        cur, name = _split(cur)
        missing.append(name)
        if not cur:
            cur = "/"
    return posixpath.normpath(path)


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def inside_workspace(path: str, ctx: Context) -> bool:
    return _inside(path, ctx.workspace_roots)


@functools.lru_cache(maxsize=64)
def _root_prefixes(roots: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """``within`` of every root at once: the roots as a set and as ``root/`` prefixes (pure string work)."""
    return frozenset(roots), tuple(r.rstrip("/") + "/" for r in roots)


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    exact, prefixes = _root_prefixes(roots)
    return path in exact or path.startswith(prefixes)


_PROTECTED_NAMES = PROTECTED_DIR_NAMES | PROTECTED_FILE_NAMES
_SUBPATH_PARENTS = frozenset(parent for parent, _ in PROTECTED_SUBPATHS)


@functools.lru_cache(maxsize=64)
def _protected_roots(home: str, protected_dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Every protected prefix for one (home, daemon dirs): pure string work, so memoising it is safe."""
    home = home.rstrip("/")
    return (*(f"{home}/{rel}" for rel in PROTECTED_HOME), *PROTECTED_SYSTEM, *protected_dirs)


@functools.lru_cache(maxsize=64)
def _credential_roots(home: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """The credential locations as a set and as ``root/`` prefixes (one C-level startswith for them all)."""
    home = home.rstrip("/")
    roots = tuple(f"{home}/{rel}" for rel in CREDENTIAL_PATHS)
    return frozenset(roots), tuple(r + "/" for r in roots)


def is_credential(path: str, ctx: Context) -> bool:
    """A credential location (``~/.ssh``, ``~/.aws`` ...): never inside the workspace for the mode."""
    exact, prefixes = _credential_roots(ctx.home)
    return path in exact or path.startswith(prefixes)


# /proc entries that only describe the machine; any other /proc or /dev/fd path can reach another process's
# files, root or environment (/proc/self/root/etc/shadow, /proc/1/environ, /dev/fd/3): never resolvable.
_PROC_PLAIN = frozenset(
    {
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/version",
        "/proc/loadavg",
        "/proc/uptime",
        "/proc/stat",
        "/proc/filesystems",
        "/proc/swaps",
        "/proc/partitions",
        "/proc/diskstats",
        "/proc/devices",
        "/proc/interrupts",
        "/proc/vmstat",
        "/proc/zoneinfo",
        "/proc/buddyinfo",
    }
)


_ELSEWHERE = ("/proc/", "/dev/fd/")


def reaches_elsewhere(path: str) -> bool:
    return (path.startswith("/proc/") and path not in _PROC_PLAIN) or path.startswith("/dev/fd/")


# a path that holds none of these (case-folded) has no protected component: most paths skip the walk below.
# A component starting with a dot, or one of the other names as a substring; a name that holds a shorter
# one (gradlew.bat, mvnw.cmd, opencode.jsonc) is found through it, so substring tests of the shortest do.
_DOTLESS_NAMES = sorted(n for n in _PROTECTED_NAMES | _SUBPATH_PARENTS if not n.startswith("."))
_PROTECTED_HINTS = tuple(n for n in _DOTLESS_NAMES if not any(m != n and m in n for m in _DOTLESS_NAMES))


def _protected_hint(folded: str) -> bool:
    return "/." in folded or folded.startswith(".") or any(n in folded for n in _PROTECTED_HINTS)


def is_protected(path: str, ctx: Context) -> bool:
    """Whether a write to ``path`` (canonical or lexical) touches a place that runs code later."""
    return _is_protected(path, ctx.home, ctx.protected_dirs)


def _is_protected(path: str, home: str, protected_dirs: tuple[str, ...]) -> bool:
    if _protected_hint(path.casefold()) and _protected_component(path):
        return True
    exact, prefixes = _protected_prefixes(home, protected_dirs)
    return path in exact or path.startswith(prefixes)


def _protected_component(path: str) -> bool:
    """A component named like a protected file or directory (any case, Windows' trailing dots and blanks)."""
    names = _PROTECTED_NAMES
    parts = [p for p in path.split("/") if p]
    folded = [p.casefold() for p in parts]
    for i, (part, low) in enumerate(zip(parts, folded, strict=True)):
        # case-insensitive file systems: .GIT is .git; Windows drops trailing dots and blanks: .git. is .git
        if low in names or (part[-1] in ". " and part.rstrip(". ").casefold() in names):
            return True
        if low in _SUBPATH_PARENTS and (i + 1 == len(folded) or (low, folded[i + 1]) in PROTECTED_SUBPATHS):
            return True  # .github/hooks/x, and .github itself (a directory moved there brings its hooks/)
    return False


@functools.lru_cache(maxsize=64)
def _protected_prefixes(home: str, protected_dirs: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The protected roots as a set and as ``root/`` prefixes (one C-level startswith for them all)."""
    roots = _protected_roots(home, protected_dirs)
    return frozenset(roots), tuple(r.rstrip("/") + "/" for r in roots)


def touches_audit(path: str, ctx: Context) -> bool:
    """Whether writing ``path`` changes the audit trail: the file, its rotations and chain checkpoint (the same
    name with a suffix), or the state directory holding them (removed or renamed, the trail goes with it).
    Directories further up (``rm -rf ~``) stay what they are already: protected or catastrophic, a person's."""
    trail = ctx.audit_trail
    if not trail or not path:
        return False
    return path == trail or path.startswith(trail + ".") or path.rstrip("/") == posixpath.dirname(trail)


def has_glob(raw: str) -> bool:
    return bool(_GLOB.search(raw))


def _glob_may_hit(pattern: str, names: frozenset[str]) -> bool:
    """Could a glob path component match a protected name or ``..``? (bash: a leading dot is literal)."""
    if not _GLOB.search(pattern):
        return False
    if not pattern.startswith((".", "[")):
        return False
    import fnmatch

    return any(fnmatch.fnmatchcase(n, pattern) for n in (*names, ".."))


def resolve(raw: str, cwd: str, ctx: Context, fs: FileSystem) -> PathInfo:
    """Resolve one path as a command or tool would see it, relative to ``cwd``."""
    expanded = expand_user(raw, ctx.home) if len(raw) < PATH_MAX else None
    if expanded is None:
        return PathInfo(raw=raw, path="", inside=False, unresolved=True)
    absolute = join(cwd, expanded)
    if len(absolute) >= PATH_MAX:  # no system call takes it whole; walking it is quadratic: not resolved
        return PathInfo(raw=raw, path="", inside=False, unresolved=True)
    lexical = posixpath.normpath(absolute)
    if lexical.startswith("//"):
        lexical = "/" + lexical.lstrip("/")
    glob_dotdot = False
    protected_glob = False
    if _GLOB.search(absolute):
        for comp in absolute.split("/"):
            if _glob_may_hit(comp, _PROTECTED_NAMES):
                protected_glob = True
                import fnmatch

                if fnmatch.fnmatchcase("..", comp):
                    glob_dotdot = True
    canonical = _canonical(absolute, fs)
    if (lexical.startswith(_ELSEWHERE) or canonical.startswith(_ELSEWHERE)) and (
        reaches_elsewhere(lexical) or reaches_elsewhere(canonical)
    ):
        return PathInfo(raw=raw, path="", inside=False, unresolved=True)
    in_ws, credential, protected = _place(canonical, ctx.home, ctx.workspace_roots, ctx.protected_dirs)
    canonical_inside = in_ws and not credential
    inside = canonical_inside and not glob_dotdot
    protected = protected or protected_glob
    if lexical != canonical:
        lex_in_ws, _cred, lex_protected = _place(lexical, ctx.home, ctx.workspace_roots, ctx.protected_dirs)
        escape = not canonical_inside and lex_in_ws
        protected = protected or lex_protected
    else:
        escape = False
    return PathInfo(raw=raw, path=canonical, inside=inside, symlink_escape=escape, protected=protected)


@functools.lru_cache(maxsize=4096)
def _place(path: str, home: str, roots: tuple[str, ...], protected_dirs: tuple[str, ...]) -> tuple[bool, bool, bool]:
    """(inside a workspace root, a credential location, protected) of one absolute path: string facts only
    (no file system), so memoising them is safe; the same few paths come back call after call."""
    exact, prefixes = _credential_roots(home)
    credential = path in exact or path.startswith(prefixes)
    return _inside(path, roots), credential, _is_protected(path, home, protected_dirs)
