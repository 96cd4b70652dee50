"""launch_activate_socket through ctypes, off macOS.

launchd cannot run here, so a tiny C library with the exact C signature stands in for libSystem
(built with the system compiler; skipped without one). It exercises what can break in ctypes: the
``int **`` out-parameter, ``size_t`` count, errno-style return codes, and freeing launchd's array with
the library's own free(). What cannot be tested here: that libSystem exports the symbol at
``/usr/lib/libSystem.dylib`` and that launchd really hands over the ``Listeners`` socket.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from nexusd.daemon import launchd
from nexusd.daemon.activation import inherited_listener, listener_path

SHIM = r"""
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int launch_activate_socket(const char *name, int **fds, size_t *cnt) {
    if (strcmp(name, "esrch") == 0) return ESRCH;
    if (strcmp(name, "noent") == 0) return ENOENT;
    if (strcmp(name, "already") == 0) return EALREADY;
    if (strcmp(name, "none") == 0) { *fds = NULL; *cnt = 0; return 0; }
    const char *path = getenv("NX_SHIM_SOCKET");
    int n = strcmp(name, "two") == 0 ? 2 : 1;
    int *arr = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (i == 0 && path) {
            struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
            strncpy(a.sun_path, path, sizeof a.sun_path - 1);
            if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) return errno;
        }
        listen(s, 8);
        arr[i] = s;
    }
    *fds = arr; *cnt = (size_t)n;
    return 0;
}
"""


@pytest.fixture(scope="module")
def shim() -> Iterator[ctypes.CDLL]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the launch_activate_socket stand-in")
    d = Path(tempfile.mkdtemp(prefix="nxshim"))
    (d / "shim.c").write_text(SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libshim.so"), str(d / "shim.c")], check=True)
    yield ctypes.CDLL(str(d / "libshim.so"))
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sock_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="nx", dir="/tmp"))
    path = d / "nexusd.sock"
    monkeypatch.setenv("NX_SHIM_SOCKET", str(path))
    yield path
    shutil.rmtree(d, ignore_errors=True)


def test_descriptors_come_back_as_ints(shim: ctypes.CDLL, sock_path: Path) -> None:
    fds = launchd.activate_socket("Listeners", lib=shim)
    assert fds is not None and len(fds) == 1
    s = socket.socket(fileno=fds[0])
    assert s.family == socket.AF_UNIX and s.type == socket.SOCK_STREAM
    assert s.getsockname() == str(sock_path)
    s.close()


def test_several_descriptors(shim: ctypes.CDLL, sock_path: Path) -> None:
    fds = launchd.activate_socket("two", lib=shim)
    assert fds is not None and len(fds) == 2 and len(set(fds)) == 2
    for fd in fds:
        os.close(fd)


def test_empty_array(shim: ctypes.CDLL) -> None:
    assert launchd.activate_socket("none", lib=shim) == []


@pytest.mark.parametrize("name", ["esrch", "noent"])
def test_not_launchd_managed_is_none(shim: ctypes.CDLL, name: str) -> None:
    assert launchd.activate_socket(name, lib=shim) is None


def test_other_errors_raise(shim: ctypes.CDLL) -> None:
    with pytest.raises(OSError) as e:
        launchd.activate_socket("already", lib=shim)
    assert e.value.errno == errno.EALREADY


def test_activation_adopts_the_launchd_socket(shim: ctypes.CDLL, sock_path: Path) -> None:
    sock = inherited_listener({}, launchd=lambda name: launchd.activate_socket(name, lib=shim))
    assert sock is not None
    assert listener_path(sock) == str(sock_path)
    sock.close()


@pytest.mark.skipif(sys.platform == "darwin", reason="off macOS only")
def test_off_macos_there_is_no_launchd() -> None:
    assert launchd.activate_socket("Listeners") is None
