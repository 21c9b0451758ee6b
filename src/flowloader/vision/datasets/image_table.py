"""ImageTable: (image, target) samples from a table's image column (encoded bytes, as LAION-
style Parquet and Hugging Face's ``Image`` feature keep them), like ImageFolder.

A batch's rows are read together, row group by row group (the table's ``__getitems__``),
then each image goes through the transform's plan as a file's would: the first crop or
resize planned from the JPEG header and done by the native kernel, the batch converted
straight into one array. ``import flowloader.vision`` does not import pyarrow: the table is
opened when an ImageTable is made.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from flowloader import order

from ..decode import located
from ..plan import Plan
from .planned import PlannedImageDataset


class ImageTable(PlannedImageDataset):
    """Sample ``i`` is (the image in row ``i``'s ``image_column``, its ``target_column``)
    through ``transform`` and ``target_transform``.

    ``source``: a Parquet source (a file, folder, glob or URL, as
    :class:`flowloader.tables.ParquetDataset`), Arrow IPC files or a ``save_to_disk`` folder
    (as :class:`flowloader.tables.ArrowDataset`), or a table dataset already made (one whose
    ``__getitems__`` gives rows as dicts, a ``datasets.Dataset`` among them). Only the two
    columns are read. Image values are encoded bytes (JPEG, PNG, ...) or a dict holding them
    under ``"bytes"`` (Hugging Face's ``Image`` feature). The target is the column's value
    (a class index, a caption); without ``target_column``, the row's index. Other keyword
    arguments go to the table (``cache_bytes``, ``storage_options``, ...);
    ``reduced_decode=False`` gives torchvision's numerics exactly, as for ImageFolder.
    """

    def __init__(
        self,
        source: Any,
        image_column: str = "image",
        target_column: str | None = None,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        *,
        reduced_decode: bool = True,
        **table_options: Any,
    ) -> None:
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.image_column, self.target_column = image_column, target_column
        self.reduced_decode = reduced_decode
        columns = [image_column] + ([target_column] if target_column else [])
        self.table = _open_table(source, columns, table_options)
        self._where = _describe(source)

    def __len__(self) -> int:
        return len(self.table)

    def block_sizes(self) -> list[int]:
        """The table's rows per block, for :class:`flowloader.BlockShuffleSampler`."""
        return list(self.table.block_sizes())

    def _read_ahead(self, indices: Sequence[int]) -> Iterator[Any]:
        return iter(self.table.__getitems__(list(indices)))

    def _load(self, index: int, plan: Plan, rng: Any, contents: Any = None) -> tuple[Any, Any]:
        row = self.table[index] if contents is None else contents
        where = f"{self._where} row {index}"
        try:
            image = row[self.image_column]
            if isinstance(image, dict):
                image = image.get("bytes")
            if not isinstance(image, (bytes, bytearray, memoryview)):
                what = "null" if image is None else type(image).__name__
                raise TypeError(f"column {self.image_column!r} holds {what}, not image bytes")
            target = index if self.target_column is None else row[self.target_column]
            if hasattr(target, "item"):  # a NumPy scalar: the Python value, as ImageFolder's
                target = target.item()
            return plan.load(bytes(image), rng, self.reduced_decode, where, index), target
        except Exception as error:
            raise located(error, where, index) from error

    def extra_repr(self) -> str:
        return f"Table: {self._where}\nColumns: {self.image_column}, {self.target_column}"

    # The resume contract (docs/design/resume.md): the table's own, its files and rows.
    def order_state(self) -> dict[str, Any] | None:
        return order.order_state(self.table)

    def order_changes(self, saved: Any, read: order.Read) -> list[str]:
        return order.order_changes(self.table, saved, read)


def _open_table(source: Any, columns: list[str], options: dict[str, Any]) -> Any:
    if hasattr(source, "__getitems__") or not isinstance(source, (str, os.PathLike, list)):
        if options:
            raise TypeError(f"table options {sorted(options)} apply to a path, not a table")
        return source
    from flowloader.tables import ArrowDataset, ParquetDataset

    first = os.fspath(source[0] if isinstance(source, list) else source)
    arrow = first.endswith((".arrow", ".feather", ".ipc")) or (
        os.path.isdir(first) and os.path.exists(os.path.join(first, "state.json"))
    )
    return (ArrowDataset if arrow else ParquetDataset)(source, columns, **options)


def _describe(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if isinstance(source, list):
        return f"{os.fspath(source[0])} (and {len(source) - 1} more)"
    return type(source).__name__
