"""Making RocksDB writes durable without holding the GIL.

rocksdict (0.3.29) holds the GIL for the whole of a synced `Rdict.write`,
fsync included (measured: a synced 20 MB write in a thread stops the main
thread for its full ~150 ms), which would freeze the event loop's thread for
every commit even with the write on a worker thread. So
Warren's stores write with sync off (RocksDB still appends the batch to its
write-ahead log with write(2)) and then fdatasync that WAL file themselves:
`os.fdatasync` releases the GIL. This is RocksDB's own "Write() then
SyncWAL()" sequence, except that readers of this process may see a batch
before its fsync ends; nothing relies on that (the broker serves messages from
memory and acts on durability only through tickets). Used through
storage/batch.py by the message store (storage/message_store.py) and the Raft
log (raft/journal.py).
"""

from __future__ import annotations

import os

from rocksdict import Rdict

_SUPER_VERSION = "rocksdb.current-super-version-number"


class WalSyncError(Exception):
    """The write-ahead log could not be found or synced."""


class WalSyncer:
    """fdatasyncs the RocksDB WAL file that the last unsynced write went to.

    WAL files are `<db>/<number>.log` with growing numbers, and a new one is
    only made by a memtable switch, which also bumps the default column
    family's super-version number (so does a finished flush). After a write:

    - super version unchanged since the last directory scan (read before that
      scan): no WAL was made since, so the write is in the newest WAL of that
      scan; one fdatasync on its cached fd. This is the path of almost every
      commit, and the fdatasync is its only call that releases the GIL (each
      release can cost a GIL hand-back wait of up to sys.getswitchinterval()
      when the loop is busy).
    - changed: rescan and fdatasync every WAL numbered at least the newest of
      the previous scan. The write went to one of those (it cannot go to an
      older one), and one that has disappeared was only deleted after its
      memtable reached a synced SST. A WAL not seen before also gets the
      directory fsync'ed, as RocksDB does for its own synced writes.

    Runs on the commit thread only, one write at a time.
    """

    def __init__(self, db: Rdict, path: str) -> None:
        self._db = db
        self._path = path
        self._version: int | None = None
        self._newest = 0  # number of the newest WAL at the last scan
        self._fd: int | None = None  # open on WAL number self._newest
        self._dir_synced = 0  # WALs numbered <= this have a durable directory entry
        self._scan(floor=0)

    def sync(self) -> None:
        version = self._db.property_int_value(_SUPER_VERSION)
        if version is not None and version == self._version and self._fd is not None:
            os.fdatasync(self._fd)
            return
        self._scan(floor=self._newest)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _scan(self, floor: int) -> None:
        # Read the version first: a switch after this read shows up as a
        # changed version at the next sync() and forces another scan.
        self._version = self._db.property_int_value(_SUPER_VERSION)
        wals = {
            int(e.name[:-4]): e.path
            for e in os.scandir(self._path)
            if e.name.endswith(".log") and e.name[:-4].isdigit()
        }
        if not wals:
            raise WalSyncError(f"no write-ahead log in {self._path}; cannot make writes durable")
        newest = max(wals)
        for n in sorted(wals):
            if n < floor:
                continue
            if n == newest and n == self._newest and self._fd is not None:
                os.fdatasync(self._fd)
                continue
            try:
                fd = os.open(wals[n], os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # flushed to a synced SST and deleted
            if n == newest:
                self.close()
                self._fd = fd
                os.fdatasync(fd)
            else:
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
        self._newest = newest
        if newest > self._dir_synced:
            dfd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            self._dir_synced = newest
