"""LanceDataset: the rows of a Lance dataset, a batch taken in one call.

Lance is built for random access: ``take`` reads the rows asked, wherever they are, and a
batch of them at once is many times faster than one at a time (lance-format/lance #3981). So
``__getitems__`` is one ``take`` of the batch's rows, in the order asked; there is no block
cache. The dataset is pinned to the version it was opened at (a resume refuses another),
and opened again in each worker process on first use (it travels as its URI and version).
Needs pylance: ``pip install "flowloader[lance]"``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..dataset import Dataset
from ..order import Read
from . import values
from .blocks import item_column, selected_columns


def _lance() -> Any:
    try:
        import lance
    except ImportError as error:
        raise ImportError(
            'flowloader.tables.LanceDataset needs pylance: pip install "flowloader[lance]"'
        ) from error
    return lance


class LanceDataset(Dataset[Any]):
    """Row ``i`` of the Lance dataset at ``uri`` (a local folder or a URL Lance reads, with
    ``storage_options``), as a dict of the ``columns`` selected (all by default), values as
    :class:`ParquetDataset` gives them (``columns`` one name: that column's values).
    ``version``: the dataset version to read (default:
    the latest when it is opened, kept from then on).

    Lance's runtime is not fork-safe: worker processes start with forkserver unless the
    loader is given another ``multiprocessing_context``; threads
    (``worker_method="thread"``) suit it too, as Lance releases the GIL."""

    fork_safe = False  # the DataLoader's processes then start with forkserver

    def __init__(
        self,
        uri: str | os.PathLike[str],
        columns: str | Sequence[str] | None = None,
        *,
        version: int | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.uri = os.fspath(uri)
        self.storage_options = dict(storage_options or {})
        lance = _lance()
        try:
            opened = lance.dataset(self.uri, version=version, storage_options=self.storage_options)
        except (OSError, ValueError) as error:
            raise ValueError(f"{self.uri} is not a readable Lance dataset: {error}") from error
        self.version = int(opened.version)
        self.columns = selected_columns(columns, opened.schema, self.uri)
        self.item_column = item_column(columns)
        self.schema: pa.Schema = pa.schema([opened.schema.field(n) for n in self.columns])
        fragments = opened.get_fragments()
        self._fragments = [(int(f.fragment_id), int(f.count_rows())) for f in fragments]
        self._rows = int(opened.count_rows())
        self._opened: Any = opened
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def __len__(self) -> int:
        return self._rows

    def block_sizes(self) -> list[int]:
        """Rows per fragment (the blocks :class:`flowloader.BlockShuffleSampler` keeps
        together; Lance reads any row directly, so a full shuffle costs little more)."""
        return [rows for _, rows in self._fragments]

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> Sequence[Any]:
        """The rows at ``indices``, in that order: one ``take``."""
        positions = values.positions(indices, len(self))
        if not positions.size:
            return []
        # Lance takes rows in its own (ascending) order: ask once per distinct row, sorted,
        # then put the rows back in the order asked.
        unique, back = np.unique(positions, return_inverse=True)
        try:
            table = self._dataset().take(unique.tolist(), columns=self.columns)
        except (OSError, ValueError) as error:
            asked = positions[:8].tolist()
            raise OSError(f"{self.uri}: cannot take rows {asked}...: {error}") from error
        columns = values.numpy_columns(table, writable=True)
        gathered = {name: column[back.reshape(-1)] for name, column in columns.items()}
        return values.items(gathered, self.item_column)

    def _dataset(self) -> Any:
        with self._lock:
            if self._opened is None or self._pid != os.getpid():  # a forked copy reopens
                self._pid = os.getpid()
                self._opened = _lance().dataset(
                    self.uri, version=self.version, storage_options=self.storage_options
                )
            return self._opened

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_opened", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._opened, self._lock = None, threading.Lock()

    def __repr__(self) -> str:
        return (
            f"LanceDataset({len(self)} rows in {len(self._fragments)} fragments, version "
            f"{self.version}, columns {self.columns})"
        )

    # -- the resume contract (docs/design/resume.md) --------------------------------------

    def order_state(self) -> dict[str, Any]:
        """The version and fragments read, so that a resume notices another table."""
        return {
            "format": "flowloader.tables.LanceDataset",
            "version": self.version,
            "fragments": [list(f) for f in self._fragments],
        }

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """Rows are addressed through the fragments: any change to them moves rows."""
        if not isinstance(saved, dict) or saved.get("format") != "flowloader.tables.LanceDataset":
            return ["the state does not describe a LanceDataset"]
        now = self.order_state()
        if saved["fragments"] != now["fragments"]:
            return [
                f"the Lance dataset's fragments changed (version {saved['version']} had "
                f"{len(saved['fragments'])} fragments, version {self.version} has "
                f"{len(now['fragments'])}): open version={saved['version']} to resume"
            ]
        return []
