"""A connection's large tool-input strings in transit: ``part`` lines held until the request that names
them (``Request.uploads``), so a 5 MB Write travels in lines under the framing limit.

Bounded per connection (MAX_CHARS held, MAX_OPEN strings at once): past either, that string fails and the
request that names it is denied with the reason. Nothing here decides; it only puts the strings back.
"""

from __future__ import annotations

from nexusd.conversation import MAX_UPLOAD_CHARS

MAX_CHARS = MAX_UPLOAD_CHARS + (1 << 20)  # the largest string a client sends whole, and some slack
MAX_OPEN = 16


class Uploads:
    """Pieces by upload id; a failed id stays failed (its later pieces are dropped) until a request takes it."""

    __slots__ = ("_chars", "_failed", "_pieces")

    def __init__(self) -> None:
        self._pieces: dict[str, list[str]] = {}
        self._failed: dict[str, str] = {}
        self._chars = 0

    def add(self, upload: str, text: str) -> None:
        if upload in self._failed:
            return
        pieces = self._pieces.get(upload)
        if pieces is None:
            if len(self._pieces) + len(self._failed) >= MAX_OPEN:
                self._failed[upload] = f"more than {MAX_OPEN} large strings in transit on one connection"
                return
            pieces = self._pieces[upload] = []
        if self._chars + len(text) > MAX_CHARS:
            self._chars -= sum(len(t) for t in self._pieces.pop(upload))
            self._failed[upload] = f"larger than {MAX_CHARS} characters"
            return
        pieces.append(text)
        self._chars += len(text)

    def take(self, uploads: dict[str, str], inp: dict[str, object]) -> tuple[dict[str, str], str | None]:
        """(input key -> whole string, None), or ({}, why the request cannot be decided as sent). Every named
        upload is consumed either way."""
        whole: dict[str, str] = {}
        why: str | None = None
        for key, upload in uploads.items():
            failed = self._failed.pop(upload, None)
            pieces = self._pieces.pop(upload, None)
            if pieces is not None:
                self._chars -= sum(len(t) for t in pieces)
            if why is not None:
                continue
            if failed is not None:
                why = f"the tool input's {key!r} could not be received: {failed}"
            elif pieces is None:
                why = f"the tool input's {key!r} never arrived (no part lines for upload {upload!r})"
            elif inp.get(key) != "":
                why = f"the tool input's {key!r} came both in the request and in parts"
            else:
                whole[key] = "".join(pieces)
        return ({}, why) if why is not None else (whole, None)
