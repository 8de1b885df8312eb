"""The SQLite store's wake-up across processes: a doorbell file and the kernel's watch on it.

Another process's commit cannot poke this process's
:class:`~decider.stores.subscription.LogNotifier`. So every store rings a doorbell after each
of its commits that wrote events: it writes one byte to ``<db>-bell`` beside the database
(:class:`Doorbell`; a ``pwrite`` without ``fsync``, about a microsecond). On Linux each store
that subscribes asks the kernel (``inotify``, through ``ctypes``: no dependency) to report
writes to that file; a thread of the store's own blocks on the report and, when it comes, reads
the log's head (one query that costs microseconds) and wakes the subscriptions if the head
moved. A subscription of this process so sees another process's append within a thread
wake-up, with no polling.

Why not watch the WAL file itself: SQLite writes a commit's frames there *before* the commit is
visible (it is published through the shared-memory index, which the kernel does not report),
so a reader woken by that write may look too early and then never be told again. The doorbell
rings after the commit.

The bell itself is watched for writes, and its directory only for the bell's creation (a bell
made later, by the first writer, is then watched too): a watch on the directory's writes woke
the thread for every write to the database, its WAL and its shared-memory file, by every process,
a wake-up and a read of the log each time (on SQLite with inputs published by another process,
more CPU than the command processor's).

Where ``inotify`` is missing (not Linux, or no ``libc``) :func:`start_watch` returns ``None``
and the subscriptions keep their probe (:class:`~decider.stores.sqlite.SqliteEventStore`'s
``probe_interval``), which also stays as a backstop everywhere: appends by a writer that rings no
bell (plain ``sqlite3``), or on a file system that does not report other machines' writes (a
network mount), are still seen within ``probe_interval``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable

_IN_MODIFY = 0x00000002
_IN_IGNORED = 0x00008000
_IN_CREATE = 0x00000100
_IN_MOVED_TO = 0x00000080
_IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name

_LOG = logging.getLogger(__name__)

BELL_SUFFIX = "-bell"
"""The doorbell's name: the database file's with this added."""


class Doorbell:
    """The file a store writes a byte to after each commit (:func:`start_watch` hears it).

    The file is made by the first ring, so a store that only reads (``decider status``) leaves
    nothing beside the database. Ringing never fails a commit: a bell that cannot be opened or
    written is left silent this time and tried again at the next commit (the other processes'
    probe still finds the commit).
    """

    def __init__(self, path: str) -> None:
        self._path = path + BELL_SUFFIX
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._closed = False

    def ring(self) -> None:
        """Tell the listening processes that the log may have grown."""
        fd = self._fd if self._fd is not None else self._open()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.pwrite(fd, b"\0", 0)

    def _open(self) -> int | None:
        with self._lock:
            if self._fd is None and not self._closed:
                with contextlib.suppress(OSError):
                    self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            return self._fd

    def close(self) -> None:
        """Close the file (the bell then stays silent); safe to call twice."""
        with self._lock:
            self._closed = True
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.inotify_init1  # noqa: B018 - present on every Linux libc since 2.9
    except (OSError, AttributeError):
        return None
    return libc


class FileWatch:
    """A thread that calls ``changed()`` when the doorbell is written (or made).

    ``changed`` runs on the watch's thread and must not raise (it is the store's check of the
    head). :meth:`close` ends the thread and releases the kernel's watch.
    """

    def __init__(
        self,
        fd: int,
        names: frozenset[bytes],
        changed: Callable[[], None],
        watch_bell: Callable[[], int] | None = None,
    ) -> None:
        self._fd = fd
        self._names = names
        self._changed = changed
        self._watch_bell = watch_bell
        """Asks the kernel to report writes to the bell: its watch descriptor (< 0: it is not
        there yet)."""
        self._bell = -1 if watch_bell is None else watch_bell()
        self._wake_read, self._wake_write = os.pipe()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="decider-sqlite-watch", daemon=True)

    def start(self) -> None:
        """Start the thread (once)."""
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and close the kernel's watch; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        for fd in (self._fd, self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _run(self) -> None:
        try:
            while not self._closed:
                ready, _, _ = select.select([self._fd, self._wake_read], [], [])
                if self._closed or self._wake_read in ready:
                    return
                if self._relevant(os.read(self._fd, 65536)):
                    self._changed()
        except OSError as exc:  # the probe goes on: slower, never blind
            if not self._closed:
                _LOG.warning("the SQLite store's file watch ended (%s); probing instead", exc)

    def _relevant(self, buffer: bytes) -> bool:
        """Whether the reports in ``buffer`` say the bell rang (or was made, or the kernel's
        queue overflowed); a bell made (or replaced) is watched from then on, before
        ``changed()`` looks, so no ring after that look goes unheard."""
        offset = 0
        relevant = False
        while offset + _EVENT.size <= len(buffer):
            wd, mask, _, length = _EVENT.unpack_from(buffer, offset)
            name = buffer[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                relevant = True
            elif wd == self._bell and length == 0:
                if mask & _IN_IGNORED:
                    self._bell = -1  # the bell was removed: a new one is watched when made
                else:
                    relevant = True
            elif name in self._names:
                if self._watch_bell is not None:
                    self._bell = self._watch_bell()
                relevant = True
        return relevant


def start_watch(path: str, changed: Callable[[], None]) -> FileWatch | None:
    """Listen for the doorbell of the database file ``path``, rung by any process, calling
    ``changed()`` on a thread of the watch's own; ``None`` where the kernel cannot be asked
    (the caller keeps probing)."""
    libc = _libc()
    if libc is None:
        return None
    directory, base = os.path.split(os.path.abspath(path))
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(directory), _IN_CREATE | _IN_MOVED_TO) < 0:
        os.close(fd)
        return None
    bell = os.fsencode(os.path.join(directory, base + BELL_SUFFIX))

    def watch_bell() -> int:
        return int(libc.inotify_add_watch(fd, bell, _IN_MODIFY))

    watch = FileWatch(fd, frozenset({os.fsencode(base + BELL_SUFFIX)}), changed, watch_bell)
    watch.start()
    return watch
