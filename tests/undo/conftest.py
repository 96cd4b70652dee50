"""Undo tests: a real daemon on a temp socket (``tests/conftest.py``), the raw wire (``tests/daemon``)."""

from __future__ import annotations

from tests.daemon.conftest import raw_factory as raw_factory  # the fixture, shared
