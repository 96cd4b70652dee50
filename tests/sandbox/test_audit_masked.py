"""The sandbox hides the audit trail: a sandboxed command can neither read nor change it, by its path, through
a symlink in the workspace, or by removing the directory that holds it (real bubblewrap)."""

from __future__ import annotations

import os

from tests.sandbox.conftest import World


def test_the_audit_trail_is_masked(world: World) -> None:
    state = world.root / "state"
    trail = state / "audit.jsonl"
    trail.write_text('{"secret-audit-marker":1}\n')
    (state / "audit.jsonl.chain").write_text('{"chain-marker":1}\n')
    os.symlink(trail, world.ws / "log.txt")
    before = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
    r = world.run(
        f"echo RAN; cat {trail} log.txt {state}/audit.jsonl.chain; echo forged >> {trail}; "
        f"echo forged > log.txt; : > {trail}; rm -rf {state}; mv {state} /tmp/x; ls -a {state}; true"
    )
    assert "RAN" in r.out, r.err
    assert "secret-audit-marker" not in r.out and "chain-marker" not in r.out
    after = {p.name: p.read_bytes() for p in state.iterdir() if p.is_file()}
    assert after == before
