"""Token-file indexes shared by processes and copied with their files (issue 38, item 4):
every rank of a job opening one file at once, a corpus copied without its times, and two
dtypes over one file."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from flowloader.text import TokenDataset, write_tokens

pytestmark = pytest.mark.timeout(180)

PROCESSES = 8
OPENS = 50


def _open_many(path: str, start: float, opens: int, report: str) -> None:
    time.sleep(max(start - time.time(), 0))  # all processes begin together
    try:
        for _ in range(opens):
            ds = TokenDataset(path, dtype="uint16", eos_id=0)
            assert len(ds) == 400_000, len(ds)
    except Exception as error:  # written down for the test, which fails naming it
        Path(report).write_text(repr(error))
        raise


def test_processes_opening_one_file_at_once_share_one_index(tmp_path) -> None:
    """8 processes open a 4M-token file with eos_id= 50 times each, starting together: no
    error, and one index pair beside the file with no temporary left."""
    document = np.array([*range(1, 10), 0], dtype=np.uint16)
    path = str(tmp_path / "data" / "train.bin")
    os.makedirs(tmp_path / "data")
    np.tile(document, 400_000).tofile(path)
    context = multiprocessing.get_context("fork")
    start = time.time() + 0.5
    ranks = [
        context.Process(target=_open_many, args=(path, start, OPENS, str(tmp_path / f"r{k}")))
        for k in range(PROCESSES)
    ]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join(150)
    errors = [p.read_text() for p in sorted(tmp_path.glob("r*"))]
    assert errors == []
    assert [rank.exitcode for rank in ranks] == [0] * PROCESSES
    assert sorted(os.listdir(tmp_path / "data")) == [
        "train.bin",
        "train.bin.eos0.uint16.idx.json",
        "train.bin.eos0.uint16.idx.npy",
    ]


def test_a_copied_corpus_opens_without_a_rewrite(tmp_path) -> None:
    """cp -r without -p (a download, rsync without -t): new modification times, same bytes."""
    docs = [np.arange(n, dtype=np.uint16) for n in (5, 9, 300, 1)]
    os.makedirs(tmp_path / "corpus")
    write_tokens(docs, tmp_path / "corpus" / "t.bin")
    shutil.copytree(tmp_path / "corpus", tmp_path / "copy", copy_function=shutil.copyfile)
    copy = tmp_path / "copy" / "t.bin"
    os.utime(copy, ns=(1, 1))
    index_before = (tmp_path / "copy" / "t.bin.idx.json").read_bytes()
    ds = TokenDataset(str(copy))
    assert [d.tolist() for d in ds] == [d.tolist() for d in docs]
    assert (tmp_path / "copy" / "t.bin.idx.json").read_bytes() == index_before


def test_a_copy_whose_content_changed_is_still_refused(tmp_path) -> None:
    docs = [np.arange(n, dtype=np.uint16) for n in (5, 9, 300, 1)]
    path = write_tokens(docs, tmp_path / "t.bin")
    data = bytearray(Path(path).read_bytes())
    data[0] ^= 0xFF  # the same size, another first token
    Path(path).write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"t\.bin\.idx\.npy does not match .*rewritten since"):
        TokenDataset(path)


def test_one_file_read_with_two_dtypes_keeps_two_scans(tmp_path) -> None:
    path = tmp_path / "t.bin"
    np.array([5, 0, 7, 7, 0, 0, 9, 0], dtype=np.uint16).tofile(path)
    narrow = TokenDataset(str(path), dtype="uint16", eos_id=0)
    wide = TokenDataset(str(path), dtype="uint32", eos_id=0)
    assert [d.tolist() for d in narrow] == [[5, 0], [7, 7, 0], [0], [9, 0]]
    assert [d.tolist() for d in wide] == [[5, 7 | 7 << 16, 0], [9]]
    assert len(TokenDataset(str(path), dtype="uint16", eos_id=0)) == 4  # from its own cache
    metas = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".json"))
    assert metas == ["t.bin.eos0.uint16.idx.json", "t.bin.eos0.uint32.idx.json"]
    assert json.loads((tmp_path / metas[1]).read_text())["dtype"] == "uint32"
