"""``hive web``: the fleet's live page in a browser (see `hive.fleet._web`)."""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from hive.errors import BadInput, StateBusy, leaves

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework

DEFAULT_LISTEN = "127.0.0.1:8470"
DESCRIPTION = """\
Serve the fleet's page: `hive ls`'s table, live (each agent's context as a bar, its tokens and cost
over its last 50 turns as a chart), and a page per agent with its turns as `hive agent log` shows
them, the running turn as it is written, its running tasks with their output, and forms to send a
prompt, ask for a compaction and stop a task.

Every request needs the token: open the URL printed at start (it carries it once, then a cookie
does); a request without it gets 401. The token is new at each start, unless --token-file names
a file holding it (HIVE_WEB_TOKEN_FILE), as a service wants. It listens on loopback unless told
otherwise; put it behind a TLS proxy before you let it listen further. SIGINT or SIGTERM stops it.

An agent is reached only through its own sockets: an agent.sock or bash.sock that is a symlink,
another user's, or answered by another agent's harness is refused (nothing is sent through it;
the agent's page says why).

Each DIR is an agent's state directory, or a directory holding them, as for `hive ls`."""


class WebSettingError(BadInput):
    """A flag of `hive web` that cannot be used; the message says which and why."""


class ListenAddressTaken(StateBusy):
    """Another server listens on the address `hive web` was to listen on."""


def cannot_listen(address: str, exc: OSError) -> BadInput | StateBusy:
    """The error `hive web` ends with when it cannot listen on ``address``: it names the
    address and --listen."""
    if exc.errno == errno.EADDRINUSE:
        return ListenAddressTaken(
            f"cannot listen on {address}: the address is already in use (another server listens "
            "there); give another HOST:PORT with --listen"
        )
    why = exc.strerror or str(exc)
    return WebSettingError(f"cannot listen on {address}: {why}; give another HOST:PORT with --listen")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], help: str) -> None:
    web = commands.add_parser(
        "web", help=help, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    web.add_argument(
        "dirs", nargs="*", metavar="DIR", type=Path, help="state directories, or directories of them"
    )
    web.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_LISTEN,
        help=f"where to listen (default {DEFAULT_LISTEN})",
    )
    web.add_argument(
        "--token-file",
        metavar="F",
        type=Path,
        help="read the token from F instead of drawing one [HIVE_WEB_TOKEN_FILE]",
    )
    web.set_defaults(handler=_web)


def read_token(path: Path | None) -> str:
    """The token in ``path`` (its first line), or a new one when no file is named."""
    if path is None:
        return secrets.token_urlsafe(24)
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise WebSettingError(f"--token-file {path}: cannot be read ({exc})") from None
    if len(token) < 16:
        raise WebSettingError(
            f"--token-file {path}: the token is shorter than 16 characters; write a longer one"
        )
    return token


def _web(args: argparse.Namespace) -> int:
    import trio
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from hive.fleet import Fleet, default_roots, given_roots, make_app

    token_file = args.token_file or (
        Path(os.environ["HIVE_WEB_TOKEN_FILE"]) if os.environ.get("HIVE_WEB_TOKEN_FILE") else None
    )
    token = read_token(token_file)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise WebSettingError(f"--listen {args.listen!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN}")
    roots = tuple(given_roots(args.dirs) or default_roots())
    config = Config()
    config.bind = [args.listen]
    config.accesslog = None
    config.errorlog = None

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            stopped = trio.Event()

            async def stop_on_signal() -> None:
                async for _ in signals:
                    stopped.set()
                    return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_on_signal)
                try:
                    bound = await nursery.start(
                        lambda task_status: serve(
                            cast("ASGIFramework", make_app(Fleet(roots, token))),
                            config,
                            shutdown_trigger=stopped.wait,
                            task_status=task_status,
                            mode="asgi",
                        )
                    )
                except* OSError as failed:
                    # Raised by hypercorn from within its nurseries, before it listens.
                    first = next(exc for exc in leaves(failed) if isinstance(exc, OSError))
                    raise cannot_listen(args.listen, first) from None
                where = bound[0] if bound else f"http://{args.listen}"
                print(f"hive web: {where}/?token={token}", flush=True)
                await stopped.wait()
                nursery.cancel_scope.deadline = trio.current_time() + 5

    trio.run(main)
    print("hive web: stopped", file=sys.stderr)
    return 0
