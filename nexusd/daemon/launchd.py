"""launchd socket activation: ``launch_activate_socket(3)`` from libSystem, through ctypes.

launchd creates the sockets listed under ``Sockets`` in the agent's plist (mode ``SockPathMode``) and
hands their descriptors to the job when it asks by name. Only a process launchd started may ask.
The C signature is ``int launch_activate_socket(const char *name, int **fds, size_t *cnt)``: it returns
0 or an errno value, and the caller frees the array launchd allocated (the descriptors stay ours).

This runs on macOS only; elsewhere the tests load a tiny C library with the same signature to exercise
the marshalling (see ``tests/daemon/test_launchd.py``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

LIBSYSTEM = "/usr/lib/libSystem.dylib"  # resolved from the dyld shared cache on current macOS

_FdArray = ctypes.POINTER(ctypes.c_int)


def activate_socket(name: str, lib: ctypes.CDLL | None = None) -> list[int] | None:
    """Descriptors launchd created for ``Sockets -> name``, or None when launchd has none for us.

    None covers ESRCH (not started by launchd) and ENOENT (no socket of that name in our plist); any
    other failure raises OSError. ``lib`` is for tests; by default libSystem on macOS, and None elsewhere.
    """
    if lib is None:
        if sys.platform != "darwin":
            return None
        lib = ctypes.CDLL(LIBSYSTEM, use_errno=True)
    fn = lib.launch_activate_socket
    fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(_FdArray), ctypes.POINTER(ctypes.c_size_t)]
    fn.restype = ctypes.c_int
    free = lib.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    fds = _FdArray()
    count = ctypes.c_size_t(0)
    err = fn(name.encode(), ctypes.byref(fds), ctypes.byref(count))
    if err in (errno.ESRCH, errno.ENOENT):
        return None
    if err:
        raise OSError(err, f"launch_activate_socket({name!r}): {os.strerror(err)}")
    try:
        return [int(fds[i]) for i in range(count.value)] if fds else []
    finally:
        if fds:
            free(ctypes.cast(fds, ctypes.c_void_p))
