"""systemd's readiness protocol: tell ``$NOTIFY_SOCKET`` that a service is ready (a no-op without it)."""

from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to the service manager; False if none is listening."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.sendto(state.encode(), address)
        except OSError:
            return False
    return True
