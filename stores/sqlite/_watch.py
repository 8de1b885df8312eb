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

Keyed bells. In a group of processes each process reads its own partitions, and another
process's commit of other partitions is nothing to it: so a commit rings, besides the plain
bell ``<db>-bell`` for its events without a partition key, one keyed bell ``<db>-bell-<b>`` for
each ``b = key % 16`` of its events' keys (:data:`BELLS`), and a store listens to the plain bell
and the keyed bells of the partitions its subscriptions read (all of them where one reads every
partition, or counts partitions by a number neither a divisor nor a multiple of 16). It
re-aims when a subscription comes or goes, before the new one reads.

A process's own commits ring the bells it listens to. Before ringing keyed bells a commit
raises the head file ``<db>-bell-head`` (under ``flock``, so it never moves back) to its last
position; a watch woken by keyed bells only reads it, and where it is no further than every
row already announced (this process's commits are announced by their own notification) it
makes no look. With the head it keeps the record of the commit that raised it (:class:`Rung`:
the log's head before that commit, and its gist): a watch whose announcements end where that
commit began announces its rows from the gist, with no query (a look after another process's
commit cost about as much as the query alone: the other connection's commit had emptied this
one's page cache). A plain bell, or a bell made, is always looked at: an older decider, or a
plain writer that rings ``<db>-bell`` by hand, keeps no head file.

A bell is watched for writes, and its directory only for the bells' creation (a bell
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
import fcntl
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable

import attrs

from decider.stores.subscription import Written

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


BELLS = 16
"""Keyed bells: an event of partition key ``k`` rings bell ``k % BELLS``, which a process
whose subscriptions read partitions of a count that divides this or that this divides (16 by
default; 4, 32, ...) listens to only for its own partitions. Events without a key ring the
plain bell."""


HEAD = -1
"""Not a bell: the head file, which holds the highest position a keyed bell was rung for
(:meth:`Doorbell.rung`). Nobody listens to it."""

_POSITION = struct.Struct("<q")
_TAIL = struct.Struct("<qqqI")
"""After the head, its commit's record (:class:`Rung`): the head again (a tail whose head is
not the file's is another commit's: an older decider writes the head alone), the log's head
before that commit, its gist's modulo, and the length of its gist's text (UTF-8, after)."""

GIST_IN_HEAD = 1024
"""The longest gist text (bytes) the head file holds; a commit of a longer one leaves it
without (a watch then reads the gists in the database)."""


@attrs.frozen
class Rung:
    """What the head file holds (:meth:`Doorbell.rung`): the highest position a keyed bell was
    rung for, and, where known, the commit that rang it: the log's head before it (its rows
    are all those after that up to ``head``), its gist's text and modulo (``Gist.text``)."""

    head: int
    first: int | None = None
    modulo: int = 0
    gist: str = ""


def bell_path(path: str, bell: int | None) -> str:
    """The file of keyed bell ``bell`` (``None``: the plain bell; :data:`HEAD`: the head file)
    of the database ``path``."""
    if bell == HEAD:
        return path + BELL_SUFFIX + "-head"
    return path + BELL_SUFFIX + ("" if bell is None else f"-{bell}")


def rung_by(written: Written | None) -> set[int | None]:
    """The bells a commit that wrote ``written`` rings: each key's bell (``key % BELLS``), the
    plain one (``None``) for an event with no key; every bell where ``written`` is unknown."""
    if written is None:
        return {None, *range(BELLS)}
    return {None if key is None else key % BELLS for _, _, key in written}


class Doorbell:
    """The files a store writes a byte to after each commit (:func:`start_watch` hears them):
    the plain bell for events without a partition key, and each keyed bell
    (:data:`BELLS`) of the keys written.

    A file is made by its first ring, so a store that only reads (``decider status``) leaves
    nothing beside the database. Ringing never fails a commit: a bell that cannot be opened or
    written is left silent this time and tried again at the next commit (the other processes'
    probe still finds the commit).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._fds: dict[int | None, int] = {}
        self._reader: int | None = None
        """The head file, opened to read (:meth:`rung`)."""
        self._lock = threading.Lock()
        self._closed = False

    def ring(
        self,
        written: Written | None = None,
        last: int | None = None,
        first: int | None = None,
        gist: tuple[int, str] | None = None,
    ) -> None:
        """Tell the listening processes that the log may have grown by what ``written`` says
        (each event's stream, type and key; ``None``: unknown, every bell) up to position
        ``last``. A keyed bell is rung only after the head file holds at least ``last``
        (:meth:`rung`); without ``last``, the plain bell is rung instead. ``first``: the log's
        head before the commit, and ``gist``: its gist's modulo and text, which the head file
        keeps with ``last`` (a watch that has announced every row up to ``first`` then needs
        no query)."""
        bells = rung_by(written)
        if last is None or not self._raise_head(last, _tail(last, first, gist)):
            bells = {None}
        for bell in bells:
            fd = self._fds.get(bell)
            if fd is None:
                fd = self._open(bell)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.pwrite(fd, b"\0", 0)

    def rung(self) -> Rung | None:
        """What the head file holds (read under a shared ``flock``): the highest position a
        keyed bell was rung for, by any process, with its commit's record where the file
        keeps it; ``None`` if unknown."""
        fd = self._reader
        if fd is None:
            with contextlib.suppress(OSError):
                fd = self._reader = os.open(bell_path(self._path, HEAD), os.O_RDONLY | os.O_CLOEXEC)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                held = os.pread(fd, _POSITION.size + _TAIL.size + GIST_IN_HEAD, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            return None
        if len(held) < _POSITION.size:
            return None
        [head] = _POSITION.unpack_from(held)
        if len(held) < _POSITION.size + _TAIL.size:
            return Rung(head)
        again, first, modulo, length = _TAIL.unpack_from(held, _POSITION.size)
        start = _POSITION.size + _TAIL.size
        text = held[start : start + length]
        if again != head or length != len(text):  # an older decider wrote the head alone
            return Rung(head)
        try:
            return Rung(head, first, modulo, text.decode())
        except UnicodeDecodeError:
            return Rung(head)

    def _raise_head(self, last: int, tail: bytes = b"") -> bool:
        """Make the head file hold at least ``last`` (the highest position rung, kept under
        ``flock`` so it never moves back), followed by ``tail`` where it is ``last``'s; whether
        it does."""
        fd = self._fds.get(HEAD)
        if fd is None:
            fd = self._open(HEAD, os.O_RDWR)
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                held = os.pread(fd, _POSITION.size, 0)
                if len(held) < _POSITION.size or _POSITION.unpack(held)[0] < last:
                    os.pwrite(fd, _POSITION.pack(last) + tail, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            return False
        return True

    def _open(self, bell: int | None, mode: int = os.O_WRONLY) -> int | None:
        with self._lock:
            if bell not in self._fds and not self._closed:
                with contextlib.suppress(OSError):
                    self._fds[bell] = os.open(
                        bell_path(self._path, bell), mode | os.O_CREAT | os.O_CLOEXEC, 0o644
                    )
            return self._fds.get(bell)

    def close(self) -> None:
        """Close the files (the bells then stay silent); safe to call twice."""
        with self._lock:
            self._closed = True
            fds, self._fds = self._fds, {}
            reader, self._reader = self._reader, None
        for fd in [*fds.values(), *([] if reader is None else [reader])]:
            with contextlib.suppress(OSError):
                os.close(fd)


def _tail(last: int, first: int | None, gist: tuple[int, str] | None) -> bytes:
    """The head file's record of the commit that rang up to ``last`` (:data:`_TAIL`); none
    where its gist is unknown or too long."""
    if first is None or gist is None:
        return b""
    modulo, text = gist
    encoded = text.encode()
    if not encoded or len(encoded) > GIST_IN_HEAD:
        return b""
    return _TAIL.pack(last, first, modulo, len(encoded)) + encoded


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
    """A thread that calls ``changed()`` when a bell it listens to is written (or made).

    ``changed`` runs on the watch's thread and must not raise (it is the store's check of the
    head). :meth:`aim` says which bells to listen to; :meth:`close` ends the thread and releases
    the kernel's watches.
    """

    def __init__(
        self,
        fd: int,
        changed: Callable[[bool], None],
        add: Callable[[bytes], int],
        remove: Callable[[int], None],
    ) -> None:
        self._fd = fd
        self._changed = changed
        self._add = add
        """Asks the kernel to report writes to a bell (its name in the directory): its watch
        descriptor (< 0: it is not there yet)."""
        self._remove = remove
        self._lock = threading.Lock()
        self._bells: dict[bytes, int] = {}
        """The bells listened to, by name, each with its watch descriptor (-1: not made yet:
        watched once the directory reports it made)."""
        self._keyed: frozenset[bytes] = frozenset()
        """The names of the keyed bells among them (:meth:`Doorbell.ring`)."""
        self._watched: dict[int, bytes] = {}
        """The bells watched now, by watch descriptor (those of ``_bells`` not ``-1``)."""
        self._wake_read, self._wake_write = os.pipe()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="decider-sqlite-watch", daemon=True)

    def aim(self, names: frozenset[bytes], keyed: frozenset[bytes] = frozenset()) -> None:
        """Listen to the bells ``names`` (names in the database's directory) from now on, and
        to no other: a bell added is heard from when this returns (a ring before may be
        missed: look after)."""
        with self._lock:
            self._keyed = keyed
            for name in set(self._bells) - names:
                wd = self._bells.pop(name)
                if wd >= 0:
                    self._remove(wd)
            for name in names - set(self._bells):
                self._bells[name] = self._add(name)
            self._watched = {wd: name for name, wd in self._bells.items() if wd >= 0}

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
                relevant = self._relevant(os.read(self._fd, 65536))
                if relevant is not None:
                    self._changed(relevant)
        except OSError as exc:  # the probe goes on: slower, never blind
            if not self._closed:
                _LOG.warning("the SQLite store's file watch ended (%s); probing instead", exc)

    def _relevant(self, buffer: bytes) -> bool | None:
        """Whether the reports in ``buffer`` say a bell listened to rang (or was made, or the
        kernel's queue overflowed): ``True`` if only keyed bells rang, ``False`` if anything
        else, ``None`` if nothing relevant. A bell made (or replaced) is watched from then on,
        before ``changed()`` looks, so no ring after that look goes unheard."""
        offset = 0
        relevant: bool | None = None
        with self._lock:
            watched = self._watched
            while offset + _EVENT.size <= len(buffer):
                wd, mask, _, length = _EVENT.unpack_from(buffer, offset)
                name = buffer[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    relevant = False
                elif length == 0 and wd in watched:
                    if mask & _IN_IGNORED:
                        # The bell was removed: a new one is watched when made.
                        gone = watched.pop(wd)
                        if self._bells.get(gone) == wd:
                            self._bells[gone] = -1
                    elif watched[wd] not in self._keyed:
                        relevant = False
                    elif relevant is None:
                        relevant = True
                elif length and name in self._bells:
                    self._bells[name] = made = self._add(name)
                    for old in [w for w, n in watched.items() if n == name and w != made]:
                        del watched[old]  # a bell replaced: the old file's watch is done
                    if made >= 0:
                        watched[made] = name
                    relevant = False
        return relevant


def start_watch(
    path: str, changed: Callable[[bool], None], bells: frozenset[int | None]
) -> FileWatch | None:
    """Listen for the ``bells`` (:func:`bell_path`) of the database file ``path``, rung by any
    process, calling ``changed()`` on a thread of the watch's own; ``None`` where the kernel
    cannot be asked (the caller keeps probing)."""
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
    folder = os.fsencode(directory)

    def add(name: bytes) -> int:
        return int(libc.inotify_add_watch(fd, os.path.join(folder, name), _IN_MODIFY))

    def remove(wd: int) -> None:
        libc.inotify_rm_watch(fd, wd)

    watch = FileWatch(fd, changed, add, remove)
    watch.aim(*bell_names(base, bells))
    watch.start()
    return watch


def bell_names(
    base: str, bells: frozenset[int | None]
) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The file names of ``bells`` of the database file named ``base``, and of the keyed ones
    among them (:meth:`FileWatch.aim`'s arguments)."""
    names = {bell: os.fsencode(bell_path(base, bell)) for bell in bells}
    return frozenset(names.values()), frozenset(n for b, n in names.items() if b is not None)
