"""Tables as map-style datasets: Parquet files (local or remote), Arrow IPC files,
``datasets``' ``save_to_disk`` folders and Lance datasets (pylance, imported when one is
opened). Needs pyarrow (``pip install "flowloader[tables]"``);
``import flowloader`` does not import it.

A table is random access by row, so everything the loader guarantees holds: the same batches
for any ``num_workers`` and worker method, exact resume, ``DistributedSampler``. A batch's
rows are read together (``__getitems__``), row group by row group;
:class:`flowloader.BlockShuffleSampler` shuffles while keeping row groups together;
:class:`PadCollate` pads ragged list columns (token ids) into arrays, with their lengths.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
except ImportError as error:  # pragma: no cover - the message is the point
    raise ImportError(
        'flowloader.tables needs pyarrow: pip install "flowloader[tables]"'
    ) from error

from .arrow import ArrowDataset
from .lance import LanceDataset
from .parquet import ParquetDataset
from .ragged import PadCollate

__all__ = ["ArrowDataset", "LanceDataset", "PadCollate", "ParquetDataset"]
