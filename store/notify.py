"""Cross-process wake-ups for the embedded store: Unix datagram sockets.

SQLite tells no one when another process commits. So every process that
waits for new events binds one datagram socket in a directory shared by
everyone using the same database file, and every writer, once its
transaction has committed, sends a tiny datagram (the group id) to each
socket there. The receiver only treats it as a hint to look at the database
now; the log stays the source of truth, so a datagram that is lost (a full
receive buffer, a socket bound a moment after the send) costs latency, never
an envelope: the waiting side still looks on its own every few hundred
milliseconds (``EmbeddedStore.poll_interval``).

A socket left behind by a process that died is removed by the next writer
that finds nobody bound to it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import logging
import os
import select
import socket
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

# sun_path holds 108 bytes on Linux; keep a margin for the file name.
_MAX_DIR_LEN = 80
_SUFFIX = ".sock"
_counter = itertools.count()


def notify_dir(db_path: Path) -> Path:
    """The directory of wake-up sockets for ``db_path`` (the same in every process)."""
    beside = db_path.parent / ".notify"
    if len(os.fsencode(beside)) <= _MAX_DIR_LEN:
        return beside
    digest = hashlib.sha256(os.fsencode(db_path)).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"yeaft-notify-{os.getuid()}" / digest


class Notifier:
    """Sends wake-ups to the other processes on a database, and receives its own."""

    def __init__(self, db_path: Path) -> None:
        self.dir = notify_dir(db_path)
        self._own_prefix = f"{os.getpid()}-"
        self._send_sock: socket.socket | None = None
        self._peers: list[str] = []
        self._peers_mtime = -1
        self._recv_sock: socket.socket | None = None
        self._recv_path: str | None = None

    # -- sending (writers) --------------------------------------------------
    def send(self, group_id: str) -> None:
        """Tell every other process waiting on this database that ``group_id`` moved."""
        try:
            peers = self._list_peers()
        except OSError:
            return  # nobody has made the directory yet: nobody waits
        if not peers:
            return
        if self._send_sock is None:
            self._send_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._send_sock.setblocking(False)
        payload = group_id.encode()
        for name in peers:
            path = str(self.dir / name)
            try:
                self._send_sock.sendto(payload, path)
            except BlockingIOError:
                pass  # its buffer is full: it has wake-ups to read already
            except (ConnectionRefusedError, FileNotFoundError):
                # Nobody bound: the process died without removing its socket.
                with contextlib.suppress(OSError):
                    os.unlink(path)
                self._peers_mtime = -1
            except OSError as exc:
                if exc.errno not in (errno.ENOBUFS, errno.EAGAIN):
                    log.debug("wake-up to %s failed", path, exc_info=True)

    def _list_peers(self) -> list[str]:
        mtime = os.stat(self.dir).st_mtime_ns
        if mtime != self._peers_mtime:
            self._peers = [
                n
                for n in os.listdir(self.dir)
                if n.endswith(_SUFFIX) and not n.startswith(self._own_prefix)
            ]
            self._peers_mtime = mtime
        return self._peers

    # -- receiving (the process's event poller) ----------------------------
    def listen(self) -> None:
        """Bind this process's socket (idempotent); writers reach it from now on."""
        if self._recv_sock is not None:
            return
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = str(self.dir / f"{self._own_prefix}{id(self):x}-{next(_counter)}{_SUFFIX}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.setblocking(False)
        self._recv_sock, self._recv_path = sock, path

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a wake-up; drain them; True if any came."""
        sock = self._recv_sock
        if sock is None:
            return False
        try:
            ready, _, _ = select.select([sock], [], [], timeout)
        except (OSError, ValueError):  # closed under us
            return False
        if not ready:
            return False
        woke = False
        while True:
            try:
                sock.recv(512)
            except (BlockingIOError, OSError):
                return woke
            woke = True

    def poke_self(self) -> None:
        """Wake this process's own ``wait`` (used to stop the poller promptly)."""
        if self._recv_path is None:
            return
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            s.sendto(b"", self._recv_path)

    def close(self) -> None:
        """Unbind and remove this process's socket; close the sending socket."""
        if self._recv_sock is not None:
            self._recv_sock.close()
            self._recv_sock = None
        if self._recv_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._recv_path)
            self._recv_path = None
        if self._send_sock is not None:
            self._send_sock.close()
            self._send_sock = None
