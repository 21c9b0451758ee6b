"""Whole messages on a pipe, read and written with ``os.read`` and ``os.write`` directly.

The framing is ``multiprocessing.Connection``'s (a 4-byte big-endian length, or -1 and an
8-byte length past 2 GiB), so a worker keeps its Connection ends. The main process's side
skips Connection's layers, which it would pay once per batch each way: its checks, a BytesIO
and two reads per message. One read takes everything the pipe holds, so several replies that
arrived together cost one system call.
"""

from __future__ import annotations

import os
import struct

_SHORT = struct.Struct("!i")
_LONG = struct.Struct("!Q")
_LARGEST_SHORT = 0x7FFFFFFF
# A pipe holds 64 KiB by default: one read empties it.
READ_SIZE = 1 << 16


def write_message(fd: int, data: bytes) -> None:
    """Write ``data`` as one message (blocks until the pipe has taken all of it)."""
    size = len(data)
    header = _SHORT.pack(size) if size <= _LARGEST_SHORT else _SHORT.pack(-1) + _LONG.pack(size)
    # One write for small messages; a large one is not copied to prepend its header.
    _write_all(fd, header + data if size <= READ_SIZE else header)
    if size > READ_SIZE:
        _write_all(fd, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class MessageReader:
    """Reads whole messages from one pipe. A message begun in one read is finished by
    blocking reads: its writer writes whole messages, so the rest is on its way (or the pipe
    closes, when the writer died half-way)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def read_into(self, messages: list[bytes]) -> bool:
        """Append the messages the pipe holds now (at least one byte must be readable, or
        this blocks); False once the pipe is closed, after the whole messages before it."""
        data = os.read(self._fd, READ_SIZE)
        position, end = 0, len(data)
        while position < end:
            size, start = _header(data, position, end)
            if start and start + size <= end:
                messages.append(data[start : start + size])
                position = start + size
            elif start:  # the body is cut short: read exactly the rest, nothing after it
                body = self._finish(data[start:end], size)
                if body is None:
                    return False
                messages.append(body)
                return True
            else:  # the header is cut short
                more = os.read(self._fd, READ_SIZE)
                if not more:
                    return False
                data, position = data[position:] + more, 0
                end = len(data)
        return end > 0

    def _finish(self, head: bytes, size: int) -> bytes | None:
        """The message whose first bytes are ``head``; None if the pipe closes first."""
        parts, missing = [head], size - len(head)
        while missing:
            more = os.read(self._fd, min(missing, 1 << 20))
            if not more:
                return None
            parts.append(more)
            missing -= len(more)
        return b"".join(parts)


def _header(data: bytes, position: int, end: int) -> tuple[int, int]:
    """(the message's size, where its body starts), or (0, 0) if the header is not all here."""
    if end - position >= 4:
        (size,) = _SHORT.unpack_from(data, position)
        if size != -1:
            return size, position + 4
        if end - position >= 12:
            return _LONG.unpack_from(data, position + 4)[0], position + 12
    return 0, 0
