"""A submitter's owner token, and whether the process a token names is gone."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence


def new_owner() -> str:
    """A submitter's token: host, process and a random part (a restarted pid is not reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_gone(owner: str | None) -> bool:
    """``owner`` (a ``new_owner`` token) is a process of this host no longer alive (only a
    pid of this host can be asked; one reused since reads as alive: the lease is waited out)."""
    pid = _pid_of_this_host(owner)
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, under another user
    return False


def _pid_of_this_host(owner: str | None) -> int | None:
    """The pid a token names when it names this host, else None."""
    host, _, rest = (owner or "").rpartition(":")[0].rpartition(":")
    if host != socket.gethostname() or not rest.isdigit():
        return None
    return int(rest)


__all__: Sequence[str] = ("holder_gone", "new_owner")
