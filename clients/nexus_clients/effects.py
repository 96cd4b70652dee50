"""What a call does, in a person's words, ranked: the line a person reads before answering.

"risk: high (needs danger-full-access)" said the same for ``make install``, ``docker system prune -af`` and
``curl … | sh``. This turns what the classifier already found (sub-commands, files read and written,
flags, the domain) into sentences such as "runs code fetched from the network" or "reads a private key:
~/.ssh/id_rsa", most serious first. Pure: it reads only the verdict (the wire's ``CallDetails``), so every
UI (TUI, web inbox, ``nexusctl``) shows the same words. The requirement name stays available as detail.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from nexusd.protocol import CallInfo, Verdict

FETCHERS = frozenset({"curl", "wget", "fetch", "http", "https", "aria2c", "nc", "ncat", "socat"})
INTERPRETERS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "fish",
        "python",
        "python3",
        "python2",
        "node",
        "perl",
        "ruby",
        "php",
        "deno",
        "bun",
        "pwsh",
        "powershell",
        "source",
        ".",
    }
)
DELETERS = frozenset({"rm", "rmdir", "unlink", "shred", "srm", "trash", "trash-put"})
NETWORK = frozenset({"ssh", "scp", "sftp", "rsync", "ftp", "telnet", "nc", "ncat", "curl", "wget", "git-push"})
INSTALLERS = {
    ("npm", "install"),
    ("npm", "i"),
    ("npm", "ci"),
    ("pnpm", "install"),
    ("pnpm", "add"),
    ("yarn", "add"),
    ("yarn", "install"),
    ("pip", "install"),
    ("pip3", "install"),
    ("uv", "pip"),
    ("uv", "add"),
    ("cargo", "install"),
    ("gem", "install"),
    ("go", "install"),
    ("apt", "install"),
    ("apt-get", "install"),
    ("brew", "install"),
    ("pipx", "install"),
    ("bun", "add"),
    ("bun", "install"),
}
# Options that send a file's content to the other end (curl -F name=@file, -T file, -d @file; wget --post-file).
UPLOAD_OPTIONS = ("-F", "--form", "-T", "--upload-file", "--data-binary", "--data", "-d", "--data-raw", "--post-file")


def _uploads(argv: list[str]) -> list[str]:
    """The files a fetcher sends away (``curl -F f=@x`` sends x), as its words name them."""
    if _base(argv[0]) not in FETCHERS:
        return []
    out: list[str] = []
    for i, word in enumerate(argv[1:], 1):
        opt, eq, attached = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        if opt not in UPLOAD_OPTIONS:
            continue
        value = attached if (eq or attached) else (argv[i + 1] if i + 1 < len(argv) else "")
        if opt in ("-T", "--upload-file", "--post-file"):
            out.append(value)
        elif "@" in value or "<" in value:
            out.append(value.split("@", 1)[-1] if "@" in value else value.split("<", 1)[-1])
    return [x for x in out if x]


SECRET_PARTS = (
    "/.ssh/",
    "/.aws/",
    "/.gnupg/",
    "/.kube/",
    "/.docker/config.json",
    "/.netrc",
    "/.git-credentials",
    "/.config/gcloud/",
    "/.npmrc",
    "/.pypirc",
    "/.password-store/",
)
SECRET_NAMES = ("id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", ".pem", ".key", ".p12", ".pfx", "credentials")
CODE_LATER = (
    "/.git/hooks/",
    "/.git/config",
    "/.claude",
    "/.gemini",
    "/.codex",
    "/.cursor",
    "/.vscode/",
    "/.idea/",
    "/.husky/",
    "/.envrc",
    "/.bashrc",
    "/.zshrc",
    "/.profile",
    "/.bash_profile",
    "/.mcp.json",
    "/.npmrc",
    "/.config/systemd",
)


@dataclass(frozen=True, order=True)
class Effect:
    rank: int  # 0 most serious
    text: str


def _is_secret(path: str) -> bool:
    base = posixpath.basename(path)
    return (
        any(part in path + "/" for part in SECRET_PARTS)
        or any(n in base for n in SECRET_NAMES)
        or base == ".env"
        or (base.startswith(".env.") and not base.endswith((".example", ".sample")))
    )


def _inside(path: str, root: str | None) -> bool:
    return bool(root) and (path == root or path.startswith(root.rstrip("/") + "/"))  # type: ignore[union-attr]


def _where(paths: list[str]) -> str:
    if len(paths) == 1:
        return paths[0]
    common = posixpath.commonpath(paths) if all(p.startswith("/") for p in paths) else ""
    return f"{len(paths)} paths under {common}" if common and common != "/" else f"{len(paths)} paths"


def _base(word: str) -> str:
    return posixpath.basename(word)


def effects(call: CallInfo, verdict: Verdict) -> list[Effect]:
    """What the call does, most serious first (empty: nothing beyond reading inside the workspace)."""
    det = verdict.details
    flags = set(verdict.flags)
    out: list[Effect] = []
    ws = call.workspace or call.cwd
    if "catastrophic" in flags:
        note = next((n for n in (det.notes if det else []) if "catastroph" in n or " -r " in n or "destroy" in n), "")
        out.append(Effect(0, f"can destroy data or the system{': ' + note if note else ''}"))
    commands = [c for c in (det.commands if det else []) if c]
    names = [_base(c[0]) for c in commands]
    if any(n in FETCHERS for n in names) and any(n in INTERPRETERS for n in names[1:]):
        out.append(Effect(0, "runs code fetched from the network"))  # anything at all, chosen elsewhere
    reads, writes = (list(det.reads), list(det.writes)) if det else ([], [])
    uploaded: list[str] = []
    for n, c in enumerate(commands):
        for f in _uploads(list(c)):
            if "{}" in f and n > 0:  # find … | xargs curl -F f=@{}: the files are what the command before names
                f = "the files named by '" + " ".join(commands[n - 1]) + "' (names that arrive at run time)"
            uploaded.append(f)
    if uploaded:
        # a program the classifier does not know has its operands counted as read and written (the safe guess):
        # curl's "name=@file" is a file sent away, not one changed
        words = [w for c in commands if _uploads(list(c)) for w in c[1:]]
        writes = [p for p in writes if not any(w.endswith(posixpath.basename(p)) for w in words)]
        out.append(Effect(0, f"uploads files to another machine: {', '.join(dict.fromkeys(uploaded))}"))
    secrets = [p for p in reads if _is_secret(p)]
    if secrets:
        out.append(Effect(1, f"reads a private key or credentials: {_where(secrets)}"))
    later = [p for p in writes if any(part in p + "/" for part in CODE_LATER)]
    if later or "protected_path" in flags:
        out.append(
            Effect(
                1,
                "changes files that run code later (git hooks, agent or editor settings, shell "
                f"start-up files){': ' + _where(later) if later else ''}",
            )
        )
    outside_w = [p for p in writes if not _inside(p, ws)]
    if outside_w:
        out.append(Effect(1, f"writes outside the workspace: {_where(outside_w)}"))
    if "dangerous_env" in flags:
        out.append(Effect(1, "changes what programs load or run (LD_PRELOAD, PATH, GIT_* ...)"))
    if "dynamic" in flags or "hidden_effect" in flags or "unparseable" in flags:
        out.append(Effect(2, "does something nexusd cannot see in full (code built at run time, or hidden in options)"))
    deleting = [
        c
        for c in commands
        if _base(c[0]) in DELETERS
        or (_base(c[0]) == "find" and "-delete" in c)
        or (_base(c[0]) == "git" and "clean" in c[1:3])
    ]
    if deleting:
        targets = [p for p in writes] or ["files"]
        out.append(Effect(2 if all(_inside(p, ws) for p in writes) else 1, f"deletes {_where(targets)}"))
    if any((_base(c[0]), c[1]) in INSTALLERS for c in commands if len(c) > 1):
        out.append(Effect(2, "installs packages (their install scripts run)"))
    outside_r = [p for p in reads if not _inside(p, ws) and p not in secrets]
    if outside_r:
        out.append(Effect(3, f"reads outside the workspace: {_where(outside_r)}"))
    if any(n in NETWORK for n in names) or any(_base(c[0]) == "git" and c[1:2] == ["push"] for c in commands):
        out.append(Effect(3, "talks to other machines over the network"))
    if det and det.domain:
        out.append(Effect(3, f"fetches from {det.domain}"))
    if verdict.requirement == "danger-full-access" and commands and not out:  # nothing more specific found
        out.append(Effect(3, f"runs programs that can do anything you can: {', '.join(dict.fromkeys(names))}"))
    inside_w = [p for p in writes if _inside(p, ws) and p not in later]
    if inside_w and not deleting:
        out.append(Effect(4, f"changes files in the workspace: {_where(inside_w)}"))
    return sorted(dict.fromkeys(out))


def headline(call: CallInfo, verdict: Verdict) -> str:
    """The most serious effect, or a plain description when there is nothing to warn about."""
    found = effects(call, verdict)
    if found:
        return found[0].text
    det = verdict.details
    if det is None:
        return "no details from the classifier"
    return "reads inside the workspace" if det.kind in ("read", "search") or det.reads else "nothing flagged"
