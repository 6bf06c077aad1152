"""``SegmentBuffer``: the on-disk queue of remote_write bodies kept while the engine cannot take them.

Layout of ``buffer_dir``: ``<n>.seg`` segment files (``n`` a zero-padded sequence number), written
append-only and fsync'd after every write; ``cursor`` (``<n> <offset>``: the first record not yet
acknowledged; rewritten atomically after each acknowledgement, not fsync'd, so a crash re-sends at most
the records acknowledged since the last write, which the engines take as duplicates); ``lock`` (an
``flock`` held while the buffer is open, so two services cannot share one directory).

A record is a 12-byte header ``<length u32><samples u32><crc32 u32>`` (little-endian) and ``length``
bytes of snappy-compressed ``WriteRequest``. Records are read back in write order, across restarts. A
torn record at the end of a segment (a crash while writing) or one whose CRC does not match ends that
segment: it is logged and skipped. Segments are deleted once every record in them is acknowledged.

Used by one thread at a time (the sender of ``RemoteWriteClient``); not thread-safe.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import zlib
from pathlib import Path

from servemetrics.store.errors import BufferLockedError

log = logging.getLogger(__name__)
_HEADER = struct.Struct("<III")
SEGMENT_BYTES = 16 << 20
"""A segment is closed for writing once it holds this many bytes (16 MiB)."""


class SegmentBuffer:
    """An append-only, fsync'd queue of ``(samples, body)`` records in ``directory``.

    Raises:
        BufferLockedError: another process holds ``directory`` (its ``lock`` file).
    """

    def __init__(self, directory: Path, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._segment_bytes = segment_bytes
        self._lock_file = open(self.directory / "lock", "a+b")  # noqa: SIM115 - held until close()
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise BufferLockedError(
                f"the remote_write buffer {self.directory} is in use by another process; give each "
                "service its own store.buffer_dir (or data_dir)"
            ) from None
        self._segments = sorted(int(p.stem) for p in self.directory.glob("*.seg") if p.stem.isdigit())
        self._read_seg, self._read_off = self._load_cursor()
        self._segments = [n for n in self._segments if n >= self._read_seg]
        self._write_seg = (self._segments[-1] + 1) if self._segments else self._read_seg
        self._pending: tuple[int, int, int] | None = None  # (samples, end offset, segment) of peek()
        self.samples, self.bytes = self._count()

    # -- state -----------------------------------------------------------------------------------

    def _path(self, n: int) -> Path:
        return self.directory / f"{n:016d}.seg"

    def _load_cursor(self) -> tuple[int, int]:
        try:
            seg, off = (self.directory / "cursor").read_text().split()
            return int(seg), int(off)
        except (OSError, ValueError):
            return (self._segments[0] if self._segments else 0), 0

    def _save_cursor(self) -> None:
        tmp = self.directory / "cursor.tmp"
        tmp.write_text(f"{self._read_seg} {self._read_off}\n")
        os.replace(tmp, self.directory / "cursor")

    def _count(self) -> tuple[int, int]:
        samples = size = 0
        for n in self._segments:
            off = self._read_off if n == self._read_seg else 0
            with open(self._path(n), "rb") as f:
                f.seek(off)
                while (head := f.read(_HEADER.size)) and len(head) == _HEADER.size:
                    length, count, _ = _HEADER.unpack(head)
                    f.seek(length, os.SEEK_CUR)
                    samples += count
                    size += _HEADER.size + length
        return samples, size

    @property
    def empty(self) -> bool:
        """True when every record written has been acknowledged."""
        return self.samples == 0 and self.bytes == 0

    # -- writing ---------------------------------------------------------------------------------

    def write(self, records: list[tuple[int, bytes]]) -> None:
        """Append ``(samples, body)`` records to the current segment and fsync it."""
        if not records:
            return
        path = self._path(self._write_seg)
        if self._write_seg not in self._segments:
            self._segments.append(self._write_seg)
        data = b"".join(_HEADER.pack(len(b), n, zlib.crc32(b)) + b for n, b in records)
        with open(path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            full = f.tell() >= self._segment_bytes
        if len(self._segments) == 1:
            _fsync_dir(self.directory)
        self.samples += sum(n for n, _ in records)
        self.bytes += len(data)
        if full:
            self._write_seg += 1

    # -- reading ---------------------------------------------------------------------------------

    def peek(self) -> tuple[int, bytes] | None:
        """The oldest unacknowledged ``(samples, body)``, or None when there is none."""
        while self._segments:
            seg = self._segments[0]
            if seg < self._read_seg:
                self._drop_segment(seg)
                continue
            if seg > self._read_seg:
                self._read_seg, self._read_off = seg, 0
            record = self._read(seg, self._read_off)
            if record is not None:
                count, body, end = record
                self._pending = (count, end, seg)
                return count, body
            if seg == self._write_seg:
                return None  # the segment being written: nothing more yet
            self._drop_segment(seg)
        return None

    def _read(self, seg: int, off: int) -> tuple[int, bytes, int] | None:
        with open(self._path(seg), "rb") as f:
            f.seek(off)
            head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                if head:
                    log.error("remote_write buffer %s: torn record at %d; skipping it", self._path(seg), off)
                return None
            length, count, crc = _HEADER.unpack(head)
            body = f.read(length)
        if len(body) < length or zlib.crc32(body) != crc:
            log.error(
                "remote_write buffer %s: damaged record at %d (%d samples); skipping the rest of the segment",
                self._path(seg),
                off,
                count,
            )
            return None
        return count, body, off + _HEADER.size + length

    def ack(self) -> None:
        """Acknowledge the record returned by the last ``peek``."""
        if self._pending is None:
            return
        count, end, seg = self._pending
        self._pending = None
        self.samples -= count
        self.bytes -= end - self._read_off
        self._read_seg, self._read_off = seg, end
        self._save_cursor()

    def _drop_segment(self, seg: int) -> None:
        self._segments.remove(seg)
        self._path(seg).unlink(missing_ok=True)
        if not self._segments:
            self.samples = self.bytes = 0  # anything left was unreadable and has been logged
            self._write_seg = max(self._write_seg, seg + 1)
            self._read_seg, self._read_off = self._write_seg, 0
            self._save_cursor()

    def close(self) -> None:
        """Release the directory lock (the files stay for the next start)."""
        self._lock_file.close()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
