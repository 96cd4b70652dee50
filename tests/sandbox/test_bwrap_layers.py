"""A workspace whose protected paths pass bubblewrap's 9,000-argument limit still runs sandboxed, and every
one of those paths stays read-only (real bubblewrap, through ``nexusctl run``'s runner and the agent's
wrapper).

1,500 repositories (a ``~/src``) give ~3,000 protected paths (``.git/hooks``, ``.git/config``), three words
each: bubblewrap refused the plan ("Exceeded maximum number of arguments") and no call in such a tree ran.
The plain read-only binds now move into inner bubblewraps whose arguments come from a file
(``nexusd.sandbox.bwrap``: layers)."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.policy.store import PolicyStore
from nexusd.sandbox.bwrap import BWRAP_MAX_ARGS, LAYER_BUDGET, MountSpec, build_bwrap_argv
from nexusd.sandbox.plan import plan_command
from nexusd.sandbox.probe import probe
from nexusd.sandbox.runner import execute
from tests.sandbox.conftest import run_wrapped

REPOS = 1_400  # just past the budget: 2,800 protected paths, 8,400 words


@pytest.fixture(scope="module")
def found():  # type: ignore[no-untyped-def]
    p = probe()
    assert p.available and p.backend == "bwrap", p.reason
    return p


def _repositories(numbers: range) -> Path:
    """A root (short, not under /tmp, which the sandbox replaces) whose ``ws`` holds a repository ``rNNNN``
    per number (``.git/hooks``, ``.git/config``: the protected paths), and a policy turning the sandbox on."""
    root = Path(tempfile.mkdtemp(prefix="nxly", dir="/var/tmp"))
    for i in numbers:
        git = root / "ws" / f"r{i:04}" / ".git"
        (git / "hooks").mkdir(parents=True)
        (git / "config").write_text("[core]\n")
        (git / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "cfg").mkdir()
    (root / "cfg" / "policy.toml").write_text("[sandbox]\nenabled = true\n")
    return root


@pytest.fixture(scope="module")
def tree() -> Iterator[tuple[Path, Path]]:
    root = _repositories(range(REPOS))
    yield root, root / "ws"
    shutil.rmtree(root, ignore_errors=True)


def _store(root: Path) -> PolicyStore:
    store = PolicyStore(
        config_dir=root / "cfg", state_dir=root / "state", managed_dir=root / "m", home=str(root / "home")
    )
    assert not store.load()
    return store


PROBE = (
    "for p in r0000/.git/hooks/x r0000/.git/config r0800/.git/hooks/x r1390/.git/config r1390/.git/hooks/x; do "
    '  if ( echo planted >> "$p" ) 2>/dev/null; then echo "WROTE $p"; else echo "ro $p"; fi; '
    "done; echo ok > r0800/work.txt && echo wrote-work; pwd; "
    "grep -q '^CapEff:[[:space:]]*0*$' /proc/self/status && echo no-capabilities; "
    "unshare -U true 2>/dev/null && echo MADE-A-USER-NAMESPACE; "
    # the layers' own processes keep capabilities in the outer namespace: the command reaches none of them
    "cat /proc/1/environ >/dev/null 2>&1 && echo READ-THE-OUTER-INIT; "
    "ls /proc/1/root/ >/dev/null 2>&1 && echo ENTERED-THE-OUTER-ROOT; exit 3"
)


def test_the_plan_is_split_into_layers_under_the_limit(tree, found) -> None:  # type: ignore[no-untyped-def]
    root, ws = tree
    plan = plan_command("true", str(ws), _store(root), found, workspace=str(ws))
    assert plan.allowed, plan.reason
    assert len(plan.argv) < LAYER_BUDGET + 100 < BWRAP_MAX_ARGS
    assert plan.argv.count("--args") >= 1
    protected = {p for r in range(REPOS) for p in (f"{ws}/r{r:04}/.git/hooks", f"{ws}/r{r:04}/.git/config")}
    in_layers = set()
    for word in plan.argv:
        if word.endswith(".args") and Path(word).is_file():
            in_layers |= set(Path(word).read_text().split("\0")[:-1])
    assert protected <= in_layers


@pytest.fixture
def small_tree(tmp_path: Path) -> Path:
    """140 repositories, with the budget lowered (below) so that they take six layers: the same code path as
    1,400 repositories at the real budget, without bubblewrap's own cost for thousands of mounts (quadratic:
    ~11 s for 2,700 binds on this machine; see docs/SANDBOX.md)."""
    root = _repositories(range(0, 1400, 10))
    yield root  # type: ignore[misc]
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("via", ["runner", "wrapper"])
def test_every_protected_path_stays_read_only_behind_layers(  # type: ignore[no-untyped-def]
    small_tree: Path, found, via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nexusd.sandbox import bwrap

    monkeypatch.setattr(bwrap, "LAYER_BUDGET", 500)
    root, ws = small_tree, small_tree / "ws"
    store = _store(root)
    plan = plan_command("true", str(ws), store, found, workspace=str(ws))
    assert plan.argv.count("--args") >= 4, plan.argv
    if via == "wrapper":
        r = run_wrapped(store, found, PROBE, ws, ws)
        rc, out, err = r.rc, r.out, r.err
    else:
        plan = plan_command(PROBE, str(ws), store, found, workspace=str(ws))
        assert plan.allowed, plan.reason
        with tempfile.TemporaryFile() as o, tempfile.TemporaryFile("w+") as e:
            rc = execute(plan, stdout=o, err=e)  # type: ignore[arg-type]
            o.seek(0)
            e.seek(0)
            out, err = o.read().decode(), e.read()
    assert "WROTE" not in out, out
    assert out.count("ro ") == 5 and "wrote-work" in out and f"{ws}\n" in out, (out, err)
    # the innermost layer took the outer's --cap-drop ALL and --disable-userns
    assert "no-capabilities" in out and "MADE-A-USER-NAMESPACE" not in out, out
    assert "READ-THE-OUTER-INIT" not in out and "ENTERED-THE-OUTER-ROOT" not in out, out
    assert rc == 3, (rc, err)
    assert (ws / "r0800" / "work.txt").read_text() == "ok\n"
    assert not (ws / "r0000" / ".git" / "hooks" / "x").exists()
    assert (ws / "r1390" / ".git" / "config").read_text() == "[core]\n"


def test_layers_keep_the_order_of_the_binds(tmp_path: Path) -> None:
    """Pure: the outer argv stays under the budget, every moved bind is in exactly one layer file, in the
    original order, and a bind that is not a plain read-only one (a mask, a reveal) stays outside."""
    files: list[bytes] = []

    def layer_file(data: bytes) -> str:
        files.append(data)
        return str(tmp_path / f"layer{len(files)}")

    protected = tuple(f"/w/r{i:05}/.git/hooks" for i in range(6_000))
    spec = MountSpec(cwd="/w", writable=("/w",), protected_ro=protected, masked=("/w/r00001/.env",))
    argv = build_bwrap_argv("/usr/bin/bwrap", spec, ["/bin/true"], layer_file=layer_file)
    assert len(argv) < LAYER_BUDGET and len(files) >= 3
    words = [w.decode() for f in files for w in f.split(b"\0")[:-1]]
    assert all(len(f.split(b"\0")) - 1 <= LAYER_BUDGET for f in files)
    assert words == [w for p in sorted(protected) for w in ("--ro-bind", p, p)]
    assert "/w/r00001/.env" in argv and argv.count("--args") == len(files)
    assert shlex.join(argv).endswith("-- /bin/true")
    assert build_bwrap_argv("/usr/bin/bwrap", spec, ["/bin/true"]).count("--ro-bind") > 6_000  # no writer: as is


def test_layer_files_are_reused_touched_and_cleaned(tmp_path: Path) -> None:
    """Content-addressed: the same binds give the same file (touched when used again); files unused for an
    hour go, the recent ones and the one in hand stay."""
    import os
    import time

    from nexusd.sandbox import plan as plan_module

    write = plan_module._layer_writer(tmp_path)
    first = write(b"--ro-bind\0/a\0/a\0")
    assert write(b"--ro-bind\0/a\0/a\0") == first and Path(first).read_bytes() == b"--ro-bind\0/a\0/a\0"
    old = write(b"--ro-bind\0/b\0/b\0")
    hour = plan_module.LAYER_FILES_KEPT_S
    os.utime(old, (time.time() - hour - 60, time.time() - hour - 60))
    os.utime(first, (time.time() - hour - 60, time.time() - hour - 60))
    assert write(b"--ro-bind\0/a\0/a\0") == first  # used again: touched
    other = tmp_path / "sandbox" / "unix-deny-0.bpf"
    other.write_bytes(b"x")
    os.utime(other, (0, 0))
    assert plan_module._clean_layer_files(tmp_path / "sandbox") == 1
    assert Path(first).exists() and not Path(old).exists() and other.exists()
