"""The main process's pipe framing (_ipc/framing.py) against multiprocessing.Connection's, which
the workers keep: every message whole and in order, however the bytes are cut."""

from __future__ import annotations

import multiprocessing
import os
import struct
import threading

import pytest

from flowloader._ipc.framing import READ_SIZE, MessageReader, write_message


def _pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    return read_fd, write_fd


def _read_all(reader: MessageReader, count: int) -> list[bytes]:
    messages: list[bytes] = []
    while len(messages) < count:
        assert reader.read_into(messages)
    return messages


def test_several_messages_in_one_read_come_out_whole_and_in_order() -> None:
    read_fd, write_fd = _pipe()
    sent = [b"", b"a", b"bc" * 50, bytes(range(256))]
    for data in sent:
        write_message(write_fd, data)
    received: list[bytes] = []
    assert MessageReader(read_fd).read_into(received)
    assert received == sent
    os.close(read_fd), os.close(write_fd)


@pytest.mark.timeout(30)
def test_messages_larger_than_a_read_and_headers_cut_by_the_pipe() -> None:
    """A writer thread sends messages of sizes around READ_SIZE, so that bodies and headers
    fall across reads; each comes out whole."""
    read_fd, write_fd = _pipe()
    sizes = [READ_SIZE - 5, 3, READ_SIZE * 3 + 1, READ_SIZE - 2, 7, 1, READ_SIZE, 0, 12]
    sent = [bytes([n % 251]) * n for n in sizes]

    def write() -> None:
        for data in sent:
            write_message(write_fd, data)

    writer = threading.Thread(target=write)
    writer.start()
    received = _read_all(MessageReader(read_fd), len(sent))
    writer.join()
    assert [len(m) for m in received] == sizes
    assert received == sent
    os.close(read_fd), os.close(write_fd)


def test_a_header_split_between_two_writes_is_waited_for() -> None:
    read_fd, write_fd = _pipe()
    os.write(write_fd, struct.pack("!i", 5)[:2])
    threading.Timer(0.05, lambda: os.write(write_fd, struct.pack("!i", 5)[2:] + b"hello")).start()
    assert _read_all(MessageReader(read_fd), 1) == [b"hello"]
    os.close(read_fd), os.close(write_fd)


def test_a_closed_pipe_reports_false_after_the_whole_messages_before_it() -> None:
    read_fd, write_fd = _pipe()
    write_message(write_fd, b"whole")
    os.write(write_fd, struct.pack("!i", 100) + b"only part")  # the writer died half-way
    os.close(write_fd)
    received: list[bytes] = []
    assert not MessageReader(read_fd).read_into(received)
    assert received == [b"whole"]
    assert not MessageReader(read_fd).read_into(received)  # and stays closed
    os.close(read_fd)


@pytest.mark.timeout(30)
def test_the_framing_is_connections_both_ways() -> None:
    """The workers keep multiprocessing Connections: what they send reads here, and what is
    written here reads there, small and large."""
    sizes = [0, 10, READ_SIZE + 10, 300_000]
    reader_conn, writer_conn = multiprocessing.Pipe(duplex=False)
    sent = [os.urandom(n) for n in sizes]
    writer = threading.Thread(target=lambda: [writer_conn.send_bytes(d) for d in sent])
    writer.start()
    assert _read_all(MessageReader(reader_conn.fileno()), len(sent)) == sent
    writer.join()
    writer = threading.Thread(target=lambda: [write_message(writer_conn.fileno(), d) for d in sent])
    writer.start()
    assert [reader_conn.recv_bytes() for _ in sent] == sent
    writer.join()
    reader_conn.close(), writer_conn.close()
