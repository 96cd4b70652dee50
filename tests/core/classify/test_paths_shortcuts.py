"""The path checks' shortcuts answer what the plain definitions answer (the plain forms are restated here as
the reference): the protected-name hint, the workspace-root test and the memoised place of a path."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from nexusd.core.classify import paths

_PIECES = st.sampled_from(
    [
        *sorted(paths.PROTECTED_DIR_NAMES | paths.PROTECTED_FILE_NAMES),
        *("GRADLEW", "Mvnw.CMD", "opencode.JSONC", "ſ", "K", ".", "..", "", "a", "gradle", "wrapper", "/", "//"),
        *(".github", "hooks", "copilot", "ws", "home", "u", ".ssh", "proc", "dev", "fd"),
    ]
)
_PATHS = st.lists(_PIECES, max_size=8).map("/".join) | st.text(alphabet="/.aGgrdlewmvn-K ", max_size=30)
_REFERENCE_HINT = re.compile(
    "/\\.|^\\.|"
    + "|".join(
        sorted(
            re.escape(n)
            for n in paths.PROTECTED_DIR_NAMES | paths.PROTECTED_FILE_NAMES | {p for p, _ in paths.PROTECTED_SUBPATHS}
            if not n.startswith(".")
        )
    )
)


@given(_PATHS)
@example("src/mvnw")
@example("a/GRADLEW.bat")
@example("x/opencode.jsonc")
@example("lefthook.yml")
@example("w/gradle-wrapper.properties")
@example("a/b")
@example(".a")
@example("a/.b")
def test_protected_hint_is_the_alternation_of_every_name(path: str) -> None:
    folded = path.casefold()
    assert paths._protected_hint(folded) is (_REFERENCE_HINT.search(folded) is not None)


@given(_PATHS, st.sampled_from([("/ws",), ("/ws/",), ("/",), ("/ws", "/other/dir"), ("/home/u",), ()]))
def test_place_is_the_three_plain_checks(path: str, roots: tuple[str, ...]) -> None:
    home, protected_dirs = "/home/u", ("/home/u/.config/nexus", "/var/lib/nexus/")
    path = "/" + path.lstrip("/")
    inside = any(p == r or p.startswith(r.rstrip("/") + "/") for p in [path] for r in roots)
    creds = [f"{home}/{rel}" for rel in paths.CREDENTIAL_PATHS]
    credential = any(path == c or path.startswith(c + "/") for c in creds)
    roots_protected = [*(f"{home}/{rel}" for rel in paths.PROTECTED_HOME), *paths.PROTECTED_SYSTEM, *protected_dirs]
    protected = paths._protected_component(path) or any(
        path == r or path.startswith(r.rstrip("/") + "/") for r in roots_protected
    )
    assert paths._place.__wrapped__(path, home, roots, protected_dirs) == (inside, credential, protected)


_PARTS = st.text(alphabet="/a.", max_size=8)


@given(_PARTS, _PARTS)
def test_join_and_split_are_posixpaths(a: str, b: str) -> None:
    import posixpath

    assert paths.join(a, b) == posixpath.join(a, b)
    assert paths._split(a + b) == posixpath.split(a + b)


class _GlobRecorder:
    """Only records which patterns the classifier globs (everything else: an empty world)."""

    def __init__(self) -> None:
        self.patterns: list[str] = []

    def glob(self, pattern: str, limit: int) -> list[str]:
        self.patterns.append(pattern)
        return []


def test_words_without_glob_characters_skip_the_glob_unless_the_home_has_some() -> None:
    """The early return in _Acc._glob: only a home with glob characters can make ``~/x`` a pattern."""
    from nexusd.core.classify import _Acc
    from nexusd.core.model import Context

    for home, raw, globbed in [
        ("/home/u", "x", []),
        ("/home/u", "~/x", []),
        ("/home/u", "$HOME/x", []),
        ("/home/u", "*.py", ["/ws/*.py"]),
        ("/home/u", "~/.e*", ["/home/u/.e*"]),
        ("/h[o]me/u*", "~/x", ["/h[o]me/u*/x"]),
        ("/h[o]me/u*", "${HOME}/x", ["/h[o]me/u*/x"]),
        ("/h[o]me/u*", "x", []),
    ]:
        fs = _GlobRecorder()
        _Acc(Context(cwd="/ws", workspace_roots=("/ws",), home=home), fs)._glob(raw, "/ws", write=False)  # type: ignore[arg-type]
        assert fs.patterns == globbed, (home, raw)
