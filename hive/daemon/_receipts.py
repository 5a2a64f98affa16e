"""Whether answers reached a peer that was still there, for the requests that asked."""

from __future__ import annotations

import socket
from collections.abc import Callable

import attrs

from hive.daemon._messages import RequestId


@attrs.define(eq=False)
class Receipts:
    """Whether answers reached a peer that was still there, for the requests that asked.

    An answer counts as delivered when it was written whole before the peer closed its side.
    A peer that closes its side first has gone away (the relay does so when its client closes
    its stdin, as Claude Code does when a turn is stopped mid-tool): an answer it is still sent
    reaches nobody. (One that closes a moment after the write may not have read it either:
    nothing can tell, so that end counts as told.)
    """

    _waiting: dict[RequestId, Callable[[bool], None]] = attrs.field(factory=dict)
    peer_closed: bool = False
    """Set when the reader meets the peer's end of input."""
    probe: Callable[[], bool] = lambda: False
    """Whether the peer's end of input is already waiting to be read (the reader may not have
    got to it yet)."""
    _over: bool = False

    def expect(self, request_id: RequestId, on_written: Callable[[bool], None]) -> None:
        """Call ``on_written(delivered)`` once the answer to ``request_id`` is written or cannot be."""
        if self._over:
            on_written(False)
        else:
            self._waiting[request_id] = on_written

    def written(self, request_id: RequestId, ok: bool) -> None:
        on_written = self._waiting.pop(request_id, None)
        if on_written is not None:
            on_written(ok and not self.peer_closed and not self.probe())

    def close(self) -> None:
        """The connection is over: an answer not written by now never will be."""
        self._over = True
        waiting, self._waiting = self._waiting, {}
        for on_written in waiting.values():
            on_written(False)


def peer_has_closed(sock: socket.socket) -> bool:
    """Whether the next thing to read on ``sock`` is the peer's end of input (or an error)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
