"""The one catalogue of protected places and secrets, stated once for the gate and the sandbox.

The classifier (``nexusd.core.classify.paths``) asks a person for writes to protected places and for reads of
secrets; the sandbox (``nexusd.sandbox.plan`` and ``nexusd.sandbox.nested``) binds the same protected places
read-only and masks the same secrets. The sandbox kept a home list of its own once, and it drifted from the
classifier's (issue 34.4); now both derive from the tuples below. Pure data and string work.
"""

from __future__ import annotations

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

# Environment files hold API keys more often than not: masked in the sandbox at any depth, and never read by a
# mode without a person. Templates (.env.example and friends) are meant to be read.
ENV_PREFIX = ".env"
ENV_TEMPLATES = frozenset({".env.example", ".env.sample", ".env.template", ".env.dist", ".env.defaults"})


def is_secret_file_name(name: str) -> bool:
    """A file name that holds secrets wherever it lies (``.env``, ``.env.local``, ``.env.production`` ...)."""
    return name.startswith(ENV_PREFIX) and name not in ENV_TEMPLATES


def _under_any(rel: str, roots: tuple[str, ...]) -> bool:
    return any(rel == r or rel.startswith(r + "/") for r in roots)


# Inside a repository only what runs code is protected in the sandbox: git must stay able to write objects
# and refs (the gate asks for any write in .git; the sandbox binds these two read-only).
GIT_FILES = (".git/hooks", ".git/config")
# What the sandbox binds read-only at the top of the workspace (and the cwd): every protected name but .git
# itself (GIT_FILES), and the two-component places. Deeper ones are found by ``nexusd.sandbox.nested``.
WORKSPACE_PROTECTED: tuple[str, ...] = (
    *sorted((PROTECTED_DIR_NAMES | PROTECTED_FILE_NAMES) - {".git"}),
    *(f"{parent}/{child}" for parent, child in PROTECTED_SUBPATHS),
)
# What the sandbox binds read-only in the home directory: the protected home places and the protected names,
# except what it masks as a credential (a read-only bind there would only re-expose what the mask hides).
HOME_PROTECTED: tuple[str, ...] = tuple(
    dict.fromkeys(p for p in (*PROTECTED_HOME, *WORKSPACE_PROTECTED) if not _under_any(p, CREDENTIAL_PATHS))
)
