"""FetchedBlocks: a remote table's row groups fetched once for all the workers of a machine,
bounded in bytes, never read half-written, and their folder removed by the process that made
it (not by a forked worker)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import time

import pytest

pa = pytest.importorskip("pyarrow")

from flowloader.tables.fetched import FetchedBlocks  # noqa: E402


class Owner:
    """Stands for the dataset whose life the temporary folder follows."""


def block(n: int) -> pa.Table:
    return pa.table({"id": list(range(n)), "text": [f"row {i}" for i in range(n)]})


def fetch_slowly(folder: str, log: str, n: int) -> None:
    """In a worker process: get block "b" through a fetch that logs itself and is slow, so
    that the other worker asks while it runs."""
    blocks = FetchedBlocks(folder, 1 << 30, None)

    def fetch() -> pa.Table:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        return block(n)

    assert blocks.get("b", fetch).equals(block(n))


def test_two_workers_asking_together_fetch_once(tmp_path) -> None:
    log = str(tmp_path / "fetches.log")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=fetch_slowly, args=(str(tmp_path / "f"), log, 1000))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert len((tmp_path / "fetches.log").read_text().split()) == 1
    assert sorted(os.listdir(tmp_path / "f")) == ["b.arrow", "b.arrow.lock"]


def test_the_folder_is_bounded_in_bytes(tmp_path) -> None:
    one = FetchedBlocks(str(tmp_path), 1 << 30, None)
    one.get("probe", lambda: block(2000))
    size = os.path.getsize(tmp_path / "probe.arrow")
    blocks = FetchedBlocks(str(tmp_path), int(3.5 * size), None)
    for k in range(10):
        assert blocks.get(f"k{k}", lambda: block(2000)).num_rows == 2000
        time.sleep(0.01)  # distinct write times: the oldest go first
    kept = sorted(p for p in os.listdir(tmp_path) if p.endswith(".arrow"))
    assert kept == ["k7.arrow", "k8.arrow", "k9.arrow"]


def test_a_failed_fetch_leaves_nothing_and_the_next_one_succeeds(tmp_path) -> None:
    blocks = FetchedBlocks(str(tmp_path), 1 << 30, None)

    def broken() -> pa.Table:
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        blocks.get("g", broken)
    assert not [p for p in os.listdir(tmp_path) if p.endswith((".arrow", ".partial"))]
    assert blocks.get("g", lambda: block(5)).equals(block(5))


def test_a_write_cut_short_leaves_no_block(tmp_path, monkeypatch) -> None:
    blocks = FetchedBlocks(str(tmp_path), 1 << 30, None)

    def refuse(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        blocks.get("g", lambda: block(5))
    assert sorted(os.listdir(tmp_path)) == ["g.arrow.lock"]


def test_the_temporary_folder_goes_with_its_dataset_not_with_a_forked_copy() -> None:
    owner = Owner()
    blocks = FetchedBlocks(None, 1 << 30, owner)
    blocks.get("g", lambda: block(5))
    pid = os.fork()
    if pid == 0:  # a forked worker drops its copy of the dataset and exits
        del owner
        gc.collect()
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.isdir(blocks.folder), "a forked worker removed the folder"
    del owner
    gc.collect()
    assert not os.path.exists(blocks.folder)
