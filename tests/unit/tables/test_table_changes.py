"""A table that changes between a checkpoint and its resume (the order promise, for the
states a user reaches with files: rows appended, a file added, removed, renamed, or
rewritten; token files alike): a resume that is accepted delivers exactly the batches the
changed table's own epoch has after those already delivered, which are still its own; a
refusal (a ValueError naming the file) comes only where a delivered batch would differ or a
file holding rows already read is no longer byte for byte what it was (rows appended to the
file being read included: a file holding rows read must stay as it was). Files after what
was read may change freely. Hypothesis draws the files, how far the first job read, and the
change, for Parquet, Arrow IPC and token files."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowloader as fl
from flowloader.tables import ArrowDataset, ParquetDataset
from flowloader.text import TokenDataset, write_tokens

from .test_arrow import write_ipc

CHANGES = ("append rows", "add a file", "remove a file", "rename a file", "rewrite a file")
SUFFIX = {"parquet": ".parquet", "arrow": ".arrow", "tokens": ".bin"}


def rows(tag: int, count: int) -> np.ndarray:
    """``count`` row ids that say which version of which file they are."""
    return np.arange(count, dtype=np.int64) + tag * 1000


def write(folder, name: str, ids: np.ndarray, kind: str) -> None:
    if kind == "parquet":
        pq.write_table(pa.table({"x": ids}), folder / f"{name}.parquet", row_group_size=4)
    elif kind == "arrow":
        path = folder / f"{name}.arrow"
        write_ipc(path, pa.table({"x": ids}), stream=False, rows_per_batch=4)
    else:  # documents of 1-3 tokens, each token the row's id
        for stale in folder.glob(f"{name}.bin*"):  # the file and its index, rewritten
            stale.unlink()
        documents = [np.full(1 + i % 3, x, np.int64) for i, x in enumerate(ids.tolist())]
        write_tokens(documents, folder / f"{name}.bin", dtype="uint32")


def open_table(folder, kind: str) -> Any:
    if kind == "parquet":
        return ParquetDataset(str(folder), columns="x")
    paths = sorted(str(p) for p in folder.iterdir() if p.suffix == SUFFIX[kind])
    return ArrowDataset(paths, columns="x") if kind == "arrow" else TokenDataset(paths)


def as_lists(batch: Any) -> list[Any]:
    return [np.asarray(item).tolist() for item in batch]


def contents(folder, kind: str) -> list[tuple[str, str]]:
    """(name, digest of the bytes) of each file, in order."""
    return [
        (path.name, hashlib.sha1(path.read_bytes()).hexdigest())
        for path in sorted(folder.iterdir())
        if path.suffix == SUFFIX[kind]
    ]


def read_files_intact(was, now, files: dict[str, int], prefix: int) -> bool:
    """Whether every file holding rows below ``prefix`` is where it was, byte for byte."""
    first = 0
    for k, count in enumerate(files[name] for name in sorted(files)):
        if first >= prefix:
            return True
        if k >= len(now) or now[k] != was[k]:
            return False
        first += count
    return True


def change(folder, kind: str, files: dict[str, int], how: str, which: int) -> None:
    """Change the table in ``folder`` (its files: name -> rows) as ``how`` says."""
    names = sorted(files)
    name = names[which % len(names)]
    if how == "append rows":
        last = names[-1]
        write(folder, last, rows(names.index(last) + 1, files[last] + 3), kind)
    elif how == "add a file":
        write(folder, "part-9", rows(9, 5), kind)
    elif how == "remove a file":
        for path in folder.glob(f"{name}{SUFFIX[kind]}*"):  # a token file's index with it
            path.unlink()
    elif how == "rename a file":
        for path in folder.glob(f"{name}{SUFFIX[kind]}*"):
            path.rename(folder / path.name.replace(name, f"{name}-renamed"))
    else:  # as many rows, other values
        write(folder, name, rows(50 + which, files[name]), kind)


@settings(
    max_examples=90,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(["parquet", "arrow", "tokens"]),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    batch_size=st.integers(1, 5),
    read=st.integers(0, 8),
    how=st.sampled_from(CHANGES),
    which=st.integers(0, 2),
)
def test_a_resume_after_a_table_change_is_exact_or_refused(
    tmp_path_factory, kind, sizes, batch_size, read, how, which
) -> None:
    folder = tmp_path_factory.mktemp("table")
    files = {f"part-{k}": n for k, n in enumerate(sizes)}
    if how == "remove a file" and len(files) == 1:
        how = "add a file"
    for k, (name, n) in enumerate(sorted(files.items())):
        write(folder, name, rows(k + 1, n), kind)
    loader = fl.DataLoader(open_table(folder, kind), batch_size=batch_size, collate_fn=list)
    before = [as_lists(batch) for batch in loader]
    iterator = iter(loader)
    delivered = [as_lists(next(iterator)) for _ in range(min(read, len(before)))]
    state = loader.state_dict()
    del iterator

    was = contents(folder, kind)
    change(folder, kind, files, how, which)
    intact = read_files_intact(was, contents(folder, kind), files, len(delivered) * batch_size)
    resumed = fl.DataLoader(open_table(folder, kind), batch_size=batch_size, collate_fn=list)
    after = [as_lists(batch) for batch in resumed]  # the changed table's own epoch
    still_the_same = after[: len(delivered)] == delivered
    try:
        resumed.load_state_dict(state)
    except ValueError as error:
        refusal = str(error)
    else:
        refusal = None
    if refusal is not None:
        assert not (still_the_same and intact), f"refused though nothing read changed: {refusal}"
        assert "does not fit" in refusal
        return
    assert still_the_same, f"accepted though a delivered batch is no longer the table's ({how})"
    assert delivered + [as_lists(batch) for batch in resumed] == after
