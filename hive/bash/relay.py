"""``hive-bash-mcp``: splices an MCP client's stdio to the bash daemon's Unix socket.

Standard library only, so it starts in the time of a bare interpreter: the daemon speaks
MCP, this only moves bytes. If the socket cannot be reached within five seconds (the
daemon may be starting), every JSON-RPC request is answered with an error that names the
socket and the reason, until stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time

CONNECT_WITHIN = 5.0
READ_SIZE = 65536


def _connect(path: str, deadline: float, pending: bytearray) -> tuple[socket.socket | None, str]:
    """Connect to ``path``, retrying until ``deadline``; stdin read meanwhile goes to ``pending``.

    Returns the socket, or None and the reason for the last failure.
    """
    delay = 0.005
    stdin_open = True
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            reason = _reason(exc)
            if isinstance(exc, PermissionError):
                return None, reason
        else:
            return sock, ""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, reason
        # A socket that does not exist yet cannot be waited on; retry with a short backoff,
        # reading stdin meanwhile so the client is never blocked on a full pipe.
        if stdin_open:
            stdin_open = _read_stdin_for(min(delay, remaining), pending)
        else:
            time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.25)


def _read_stdin_for(seconds: float, pending: bytearray) -> bool:
    import select

    ready, _, _ = select.select([0], [], [], seconds)
    if ready:
        data = os.read(0, READ_SIZE)
        if not data:
            return False
        pending += data
    return True


def _reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no socket there (is hive-bash-daemon running?)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (the socket exists but no daemon is listening on it)"
    if isinstance(exc, PermissionError):
        return "permission denied (the daemon's socket belongs to another user)"
    return exc.strerror or str(exc)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _splice(sock: socket.socket, pending: bytes) -> int:
    def stdin_to_socket() -> None:
        try:
            if pending:
                sock.sendall(pending)
            while data := os.read(0, READ_SIZE):
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            # The daemon went away; the main thread sees the socket close and exits.
            pass

    threading.Thread(target=stdin_to_socket, daemon=True).start()
    try:
        while data := sock.recv(READ_SIZE):
            _write_all(1, data)
    except BrokenPipeError:
        return 0
    except OSError as exc:
        print(f"hive-bash-mcp: lost the daemon's socket: {exc}", file=sys.stderr)
        return 1
    return 0


def _refuse_all(path: str, reason: str, pending: bytearray) -> int:
    """Answer each request with an error until stdin closes."""
    message = (
        f"hive-bash-mcp cannot reach the bash daemon at {path}: {reason}. Start it with "
        "`hive-bash-daemon`, or point HIVE_BASH_SOCKET (or --socket) at its socket."
    )
    print(f"hive-bash-mcp: {message}", file=sys.stderr)
    buffer = bytes(pending)
    while True:
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            for answer in _errors_for(line, message):
                try:
                    _write_all(1, answer)
                except BrokenPipeError:
                    return 1
        data = os.read(0, READ_SIZE)
        if not data:
            return 1
        buffer += data


def _errors_for(line: bytes, message: str) -> list[bytes]:
    try:
        parsed = json.loads(line)
    except ValueError:
        return []
    requests = parsed if isinstance(parsed, list) else [parsed]
    answers = []
    for request in requests:
        if isinstance(request, dict) and "method" in request and request.get("id") is not None:
            error = {"code": -32000, "message": message}
            answers.append(
                json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}).encode() + b"\n"
            )
    return answers


def default_socket() -> str:
    if os.environ.get("HIVE_BASH_SOCKET"):
        return os.environ["HIVE_BASH_SOCKET"]
    state = os.environ.get("HIVE_STATE_DIR")
    if not state:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        state = os.path.join(xdg, "hive")
    return os.path.join(state, "bash.sock")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hive-bash-mcp",
        description="An MCP stdio server for background bash, relayed to hive-bash-daemon's Unix socket. "
        "Spawn it from an MCP client (e.g. claude's --mcp-config); it holds no state of its own.",
    )
    parser.add_argument(
        "--socket",
        default=None,
        help="the daemon's socket "
        "[HIVE_BASH_SOCKET; default <HIVE_STATE_DIR or ~/.local/state/hive>/bash.sock]",
    )
    args = parser.parse_args(argv)
    path = args.socket or default_socket()
    pending = bytearray()
    try:
        sock, reason = _connect(path, time.monotonic() + CONNECT_WITHIN, pending)
        if sock is None:
            return _refuse_all(path, reason, pending)
        with sock:
            return _splice(sock, bytes(pending))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
