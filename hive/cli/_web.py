"""``hive web``: the fleet's live page in a browser (see `hive.fleet._web`)."""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from hive._files import ensure_private_dir, write_atomic
from hive._state_dir import default_state_dir
from hive.errors import BadInput, StateBusy, leaves

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework

DEFAULT_LISTEN = "127.0.0.1:8470"
DESCRIPTION = """\
Serve the fleet's page: `hive ls`'s table, live (each agent's context as a bar, its tokens and cost
over its last 50 turns as a chart), and a page per agent with its turns as `hive agent log` shows
them, the running turn as it is written, its running tasks with their output, and forms to send a
prompt, ask for a compaction and stop a task.

Every request needs the token: once in the URL as ?token=TOKEN (then a cookie carries it), or as
`Authorization: Bearer TOKEN`; a request without it gets 401. The token is read from the file
--token-file names (HIVE_WEB_TOKEN_FILE), as a service wants, else drawn anew at each start. The
line printed at start never puts the token in a log: it gives the URL and says which file holds the
token (--token-file's; a drawn one is written, 0600, to $XDG_RUNTIME_DIR/hive/web-PORT.token, else
to the default state directory, and removed at the stop), except when stdout is a terminal, where
a drawn token is printed in the URL, to be opened as it is. It listens on loopback unless told
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


def drawn_token_file(port: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Where a drawn token is written when stdout is no terminal: ``$XDG_RUNTIME_DIR/hive/``,
    else the default state directory, ``web-PORT.token``."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    directory = Path(runtime) / "hive" if runtime else default_state_dir(environ)
    return directory / f"web-{port}.token"


@contextmanager
def announced(where: str, token: str, token_file: Path | None) -> Iterator[None]:
    """Print where `hive web` listens, the token out of the line unless a person reads it on a
    terminal; a drawn token is written to a private file for the block (`drawn_token_file`)."""
    if token_file is None and sys.stdout.isatty():
        print(f"hive web: {where}/?token={token}", flush=True)
        yield
        return
    drawn = token_file is None
    if token_file is None:
        token_file = drawn_token_file(where.rpartition(":")[2])
        ensure_private_dir(token_file.parent)
        write_atomic(token_file, f"{token}\n".encode(), durable=False)
    try:
        print(f"hive web: {where}/ (the token is in {token_file})", flush=True)
        yield
    finally:
        if drawn:
            token_file.unlink(missing_ok=True)


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
                with announced(where, token, token_file):
                    await stopped.wait()
                    nursery.cancel_scope.deadline = trio.current_time() + 5

    trio.run(main)
    print("hive web: stopped", file=sys.stderr)
    return 0
