"""The ``agent`` scenario: a reproducible stream of distinct calls shaped like a coding session.

The rule scenarios rotate four commands, so after the first round every call is a decision-memo hit; an
agent's calls are mostly new (each file path, test filter and grep pattern differs). This module builds a
small project in the workspace (packages, modules, tests, docs, all real files) and then, from a seed,
one session per client: file reads and edits with varying paths, shell commands that inspect files,
greps, test runs with filters, git, commands from the real-world corpus, and now and then a
``git push`` that the benchmark policy asks about (answered by the automatic UI). About one call in
six repeats an earlier one of the same session (a test run again after an edit, ``git status`` again),
so the memo hit rate the daemon reports is roughly what a real session gets.

The same seed, client and length always give the same calls; clients differ from each other.
"""

from __future__ import annotations

import random
from pathlib import Path

from nexusd import protocol

DEFAULT_SEED = 1

_PACKAGES = ("api", "auth", "billing", "cli", "core", "db", "jobs", "search", "storage", "web")
_WORDS = (
    "account",
    "adapter",
    "batch",
    "buffer",
    "cache",
    "client",
    "config",
    "cursor",
    "event",
    "export",
    "filter",
    "handler",
    "index",
    "invoice",
    "loader",
    "mapper",
    "metrics",
    "order",
    "parser",
    "payload",
    "queue",
    "record",
    "registry",
    "report",
    "request",
    "retry",
    "router",
    "schema",
    "session",
    "token",
    "upload",
    "user",
    "validator",
    "worker",
)
_VERBS = (
    "build",
    "check",
    "create",
    "delete",
    "fetch",
    "find",
    "load",
    "merge",
    "parse",
    "render",
    "save",
    "send",
    "sync",
    "update",
    "validate",
)
_HOT = (
    "git status",
    "git diff",
    "git diff --stat",
    "ls",
    "git log --oneline -10",
    "pytest -q",
    "ls -la",
    "git status --short",
    "python -m pytest -x -q",
    "ruff check .",
)


def project_files(seed: int = DEFAULT_SEED) -> list[str]:
    """Relative paths of the project the agent works on (the same for a given seed)."""
    rnd = random.Random(f"project:{seed}")
    files = ["README.md", "pyproject.toml", "Makefile", "docs/index.md", "src/__init__.py"]
    for pkg in _PACKAGES:
        files.append(f"src/{pkg}/__init__.py")
        for word in rnd.sample(_WORDS, 6):
            files += [f"src/{pkg}/{word}.py", f"tests/{pkg}/test_{word}.py"]
        files.append(f"docs/{pkg}.md")
    return files


def populate(workspace: Path, seed: int = DEFAULT_SEED) -> None:
    """Write the project's files under ``workspace`` (small, real files: reads and greps find them)."""
    for rel in project_files(seed):
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        stem = path.stem.removeprefix("test_")
        if rel.endswith(".py"):
            body = "".join(f"def {v}_{stem}(value):\n    return value\n\n\n" for v in _VERBS[:5])
        else:
            body = f"# {stem}\n\nNotes about {stem}.\n"
        path.write_text(body, encoding="utf-8")


class _Session:
    """One agent's stream: picks the next call; remembers its own calls for the occasional repeat."""

    def __init__(self, seed: int, client: int, workspace: str, corpus: list[str]) -> None:
        self.rnd = random.Random(f"agent:{seed}:{client}")
        self.ws = workspace
        self.corpus = corpus
        self.files = project_files(seed)
        self.py = [f for f in self.files if f.startswith("src/") and f.endswith(".py") and "__init__" not in f]
        self.tests = [f for f in self.files if f.startswith("tests/")]
        self.history: list[protocol.CallInfo] = []
        self.new_files = 0

    def _ident(self) -> str:
        r = self.rnd
        return f"{r.choice(_VERBS)}_{r.choice(_WORDS)}"

    def _call(self, tool: str, data: dict[str, object]) -> protocol.CallInfo:
        return protocol.CallInfo(
            provider="claude", session="bench", tool=tool, input=data, cwd=self.ws, mode="acceptEdits"
        )

    def _bash(self, command: str) -> protocol.CallInfo:
        return self._call("Bash", {"command": command, "description": "agent"})

    def _abs(self, rel: str) -> str:
        return f"{self.ws}/{rel}"

    def _shell(self) -> protocol.CallInfo:
        r = self.rnd
        kind = r.random()
        f = r.choice(self.files)
        if kind < 0.22:  # a test run narrowed to what was just touched
            t = r.choice(self.tests)
            return self._bash(
                r.choice(
                    (
                        f"pytest {t} -k {self._ident()} -q",
                        f"python -m pytest {t}::test_{self._ident()} -x",
                        f"pytest {t} -q --no-header -rN",
                        f"pytest tests/{t.split('/')[1]} -q -x --maxfail=1",
                    )
                )
            )
        if kind < 0.38:  # looking for a name
            pkg = r.choice(_PACKAGES)
            return self._bash(
                r.choice(
                    (
                        f'grep -rn "{self._ident()}" src/{pkg}',
                        f"rg -n '{self._ident()}' --type py",
                        f"git grep -n {self._ident()}",
                        f'grep -rln "{r.choice(_WORDS)}" src tests | head -20',
                    )
                )
            )
        if kind < 0.56:  # looking at a file
            return self._bash(
                r.choice(
                    (
                        f"cat {f}",
                        f"head -n {r.randint(20, 120)} {f}",
                        f"sed -n '{(a := r.randint(1, 200))},{a + r.randint(10, 60)}p' {f}",
                        f"wc -l {f} {r.choice(self.files)}",
                        f"ls -la {f.rsplit('/', 1)[0] if '/' in f else '.'}",
                    )
                )
            )
        if kind < 0.66:  # git on a path
            return self._bash(
                r.choice(
                    (
                        f"git diff {f}",
                        f"git log --oneline -5 -- {f}",
                        f"git add {f}",
                        f"git commit -m 'Fix {self._ident().replace('_', ' ')}'",
                        f"git show HEAD~{r.randint(1, 9)} --stat",
                    )
                )
            )
        if kind < 0.70:  # asked by the benchmark policy, answered by the automatic UI
            return self._bash(f"git push origin feature/{self._ident().replace('_', '-')}")
        if kind < 0.90:
            return self._bash(r.choice(_HOT))
        return self._bash(r.choice(self.corpus))

    def next(self) -> protocol.CallInfo:
        r = self.rnd
        again = self.history and r.random() < 0.16  # a test run again, a file read again
        call = r.choice(self.history[-40:]) if again else self._fresh()
        self.history.append(call)
        return call

    def _fresh(self) -> protocol.CallInfo:
        r = self.rnd
        kind = r.random()
        if kind < 0.50:
            return self._shell()
        if kind < 0.74:
            data: dict[str, object] = {"file_path": self._abs(r.choice(self.files))}
            if r.random() < 0.3:
                data |= {"offset": r.randint(1, 300), "limit": r.choice((50, 100, 200))}
            return self._call("Read", data)
        if kind < 0.82:
            grep: dict[str, object] = {"pattern": self._ident(), "path": self._abs(f"src/{r.choice(_PACKAGES)}")}
            if r.random() < 0.4:
                grep |= {"glob": "*.py", "output_mode": "content", "-n": True}
            return self._call("Grep", grep)
        if kind < 0.86:
            return self._call("Glob", {"pattern": f"src/{r.choice(_PACKAGES)}/**/*.py", "path": self.ws})
        if kind < 0.97:
            f = self._abs(r.choice(self.py))
            old, new = self._ident(), self._ident()
            return self._call("Edit", {"file_path": f, "old_string": f"def {old}(", "new_string": f"def {new}("})
        self.new_files += 1
        rel = f"src/{r.choice(_PACKAGES)}/{r.choice(_WORDS)}_{self.new_files}.py"
        return self._call("Write", {"file_path": self._abs(rel), "content": f"def {self._ident()}():\n    pass\n"})


def session_calls(seed: int, client: int, count: int, workspace: str, corpus: list[str]) -> list[protocol.CallInfo]:
    """The first ``count`` calls of client ``client``'s session."""
    s = _Session(seed, client, workspace, corpus)
    return [s.next() for _ in range(count)]
