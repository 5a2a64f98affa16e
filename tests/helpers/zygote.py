"""The zygote of ``tests.helpers.forked_daemon``: a fresh interpreter that imports what the bash
daemon's serving takes, then forks daemons (and reaps them) on request. It imports nothing of the
tests, so that what a forked daemon inherits is the daemon's own imports and nothing else."""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
from typing import Any, NoReturn

ZYGOTE_MESSAGE_MAX = 1 << 20
"""The largest request or reply on the zygote's control socket."""


def _serve(control: socket.socket) -> None:
    """Answer requests on ``control`` until it closes: fork a daemon, or reap one."""
    from hive.bash import daemon

    # What `main` imports once its command line is read; the fork inherits it.
    getattr(daemon, "_import_serving", lambda: None)()
    while True:
        message, fds, _flags, _address = socket.recv_fds(control, ZYGOTE_MESSAGE_MAX, 3)
        if not message:
            return
        request = json.loads(message)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _become_daemon(daemon, control, request, fds)
            for fd in fds:
                os.close(fd)
            reply: dict[str, Any] = {"pid": pid}
        else:
            done, status = os.waitpid(request["pid"], 0 if request["block"] else os.WNOHANG)
            reply = {"status": os.waitstatus_to_exitcode(status) if done else None}
        control.send(json.dumps(reply).encode())


def _become_daemon(daemon: Any, control: socket.socket, request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked child: what an exec by ``subprocess.Popen(start_new_session=True)`` gives,
    then the daemon's ``main``, and the interpreter's exit as ``sys.exit(main())`` makes it
    (atexit handlers, finalization): the SystemExit unwinds the zygote's loop, which has no
    cleanup of its own. With ``cgroup``, it first moves into that cgroup (as the zygote's root
    may); with ``user`` (uid, gid), it then runs as that user, as a service manager starts one."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    control.detach()
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request["nofile"] is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, tuple(request["nofile"]))
    if request.get("cgroup") is not None:
        with open(os.path.join(request["cgroup"], "cgroup.procs"), "w") as procs:
            procs.write("0")
    if request.get("user") is not None:
        # The interpreter's library may be where that user cannot read (a pyenv under /root):
        # what the daemon would import later is imported now.
        import encodings.unicode_escape  # noqa: F401

        uid, gid = request["user"]
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    sys.argv = [daemon.__file__, *request["args"]]
    sys.exit(daemon.main())


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
