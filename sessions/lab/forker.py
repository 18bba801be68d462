"""The spawner's own process (`python -m sessions.lab.forker`, started by sessions/lab/spawner.py):
it imports the lab's servers once, then forks one per request read on its stdin and reports on
its stdout each fork's pid and each child's exit status. Closing its stdin ends it and its
children; a `reset` request ends its children alone and keeps it for the next session."""

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys

import setproctitle

# the lab's own servers, imported before the first fork; a built-in task's (fixture.*) on its
# first request (_preload), then kept for the next forks
SERVERS = ("sessions.lab.decoy", "sessions.lab.proxy.server", "sessions.lab.load")


def _child(request: dict) -> None:
    """In the forked child: become the server the request names (never returns)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)   # the spawner's; asyncio sets the server's own
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if request.get("netns"):
            _enter_netns(request["netns"])
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) \
            if request.get("stdout") else null
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        if request.get("listen_fd") is not None:
            request["argv"] += ["--listen-fd", str(request["listen_fd"])]
        if request.get("command"):
            # a program of its own dies with the spawner (which is single-threaded: the death
            # signal follows the process, never a thread of it)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == 1:
                os._exit(1)   # the spawner went before the signal was asked for
            argv = [*request["command"], *request["argv"]]
            os.execvp(argv[0], argv)
        if request["module"] not in sys.modules:
            importlib.import_module(request["module"])
        sys.argv = [request["module"], *request["argv"]]
        # `ps` (and evlab's own leftover checks) see the server it is, not the spawner
        setproctitle.setproctitle(" ".join([sys.executable, "-m", *sys.argv]))
        sys.modules[request["module"]].main(request["argv"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:   # noqa: BLE001 - reported on the child's stderr file
        import traceback
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:
    for module in SERVERS:
        importlib.import_module(module)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    out, pending = sys.stdout, b""
    children: set[int] = set()
    listeners: dict[str, socket.socket] = {}
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 512)
            _reap(children, out)
        if 0 in ready:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                if "release" in request:
                    sock = listeners.pop(request["release"], None)
                    if sock is not None:
                        sock.close()
                elif "reset" in request:
                    _end_all(children, out)
                    for sock in listeners.values():
                        sock.close()
                    listeners.clear()
                    _say(out, {"reset": True, "ticket": request["ticket"]})
                else:
                    _fork(request, children, out, listeners)
    _end_all(children, out)


def _end_all(children: set, out) -> None:
    """Kill every child and reap it, each exit reported (a server of the session ending)."""
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    while children:
        pid, status = os.waitpid(-1, 0)
        if pid in children:
            children.discard(pid)
            _say(out, {"exited": pid, "status": os.waitstatus_to_exitcode(status)})


def _say(out, message: dict) -> None:
    try:
        out.write(json.dumps(message) + "\n")
        out.flush()
    except (BrokenPipeError, ValueError):
        pass   # evlab is gone: its children are killed all the same


_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1


def _enter_netns(path: str | int) -> None:
    """setns(2) into a network namespace (os.setns is Python 3.12+)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if isinstance(path, str) else path
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        if fd is not path:
            os.close(fd)


def _listener(listeners: dict, key: str, port: int, netns: str | None) -> socket.socket:
    sock = listeners.get(key)
    if sock is None:
        # A socket belongs to the namespace it was made in, wherever it goes after.
        home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if netns:
                _enter_netns(netns)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            if netns:
                _enter_netns(home)
            os.close(home)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        listeners[key] = sock
    return sock


def _preload(request: dict) -> None:
    """Import a built-in task's module here, in the spawner, before its first fork: every later
    server or program of it (a verifier runs three times an attempt) then starts in ~2 ms
    instead of importing itself again in each child; and its `preload()`, if it has one (the
    mirror's states: the generated tree's bytes, ~55 ms a run otherwise). An import that fails
    is left to the child, which reports it on its stderr as before."""
    module = request.get("module")
    if module and not request.get("command") and module not in sys.modules:
        try:
            preload = getattr(importlib.import_module(module), "preload", None)
            if callable(preload):   # what every run of it computes alike, computed once here
                preload()
        except Exception:   # noqa: BLE001 - the child says why
            sys.modules.pop(module, None)


def _fork(request: dict, children: set, out, listeners: dict) -> None:
    _preload(request)
    try:
        if request.get("listen"):
            key, port = request["listen"]
            request["listen_fd"] = _listener(listeners, key, port, request.get("netns")).fileno()
        # what the spawner holds, out of the child's garbage collections: they would write to
        # every object's header, copying the pages the fork shares (Python's gc docs advise it)
        gc.freeze()
        pid = os.fork()
    except OSError as e:
        _say(out, {"error": f"cannot start {request['module']}: {e}",
                   "ticket": request["ticket"]})
        return
    if pid == 0:
        for sock in listeners.values():   # only its own listening socket, if any
            if sock.fileno() != request.get("listen_fd"):
                sock.close()
        _child(request)
    children.add(pid)
    _say(out, {"pid": pid, "ticket": request["ticket"]})


def _reap(children: set, out) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _say(out, {"exited": pid, "status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    _serve()
