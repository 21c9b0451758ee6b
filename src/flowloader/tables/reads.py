"""What a sampler's order will cost a table's block cache, said before the epoch starts.

A full shuffle over a table bigger than its cache reads a block (a Parquet row group, an
Arrow record batch) for a few rows and evicts it: a batch of ``b`` rows touches about
``B (1 - (1 - 1/B)^b)`` of the ``B`` blocks, and each is in an LRU cache of ``C`` blocks with
probability about ``C / B`` (uniform random access; none where the batch's own blocks
outnumber the cache, as it reads them in ascending order and each evicts the next), so an
epoch of ``S`` rows reads about ``S / b x touched x (1 - C / B)`` blocks, against about ``B``
in sequence. A
BlockShuffleSampler's batch draws from its ``window`` blocks: the same sum over ``window``
instead of ``B``, and nothing to say while the cache holds a window. The loader asks the
table (``BlockTable.cache_warning``) once, in the main process, and warns through
``warnings``; the workers say nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The samplers whose order jumps anywhere in the dataset (flowloader's, or torch's by name).
_FULL_SHUFFLES = frozenset({"RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler"})


@dataclass(frozen=True)
class Order:
    """How an epoch's order walks a table's blocks: ``span`` blocks at a time (all of them
    for a full shuffle), ``rows`` rows in batches of ``batch_size``; ``name`` says which
    sampler, for the message."""

    name: str
    span: int
    rows: int
    batch_size: int
    window: int | None  # a BlockShuffleSampler's window (blocks), None for a full shuffle


def order_of(sampler: Any, blocks: int, block_rows: float, batch_size: int | None) -> Order | None:
    """The order ``sampler`` (a sampler, or a batch sampler holding one) gives a table of
    ``blocks`` blocks of about ``block_rows`` rows each; None where it keeps to the blocks
    (in sequence) or is not one this module knows."""
    inner = getattr(sampler, "sampler", None)
    if inner is not None and hasattr(sampler, "batch_size"):  # a BatchSampler
        batch_size = batch_size or getattr(sampler, "batch_size", None)
        sampler = inner
    size = max(1, int(batch_size or 1))
    names = {kind.__name__ for kind in type(sampler).__mro__}
    try:
        rows = len(sampler)
    except TypeError:
        return None
    name = type(sampler).__name__
    if "BlockShuffleSampler" in names:
        if not getattr(sampler, "shuffle", True):
            return None
        window = int(getattr(sampler, "window", blocks))
        block_size = getattr(sampler, "block_size", None)
        if block_size is not None:  # its blocks are runs of rows: the row groups they cover
            window = math.ceil(window * block_size / max(block_rows, 1.0)) + 1
        span = min(window, blocks)
        return Order(f"{name}(window={sampler.window})", span, rows, size, span)
    full = names & _FULL_SHUFFLES or (
        "DistributedSampler" in names and getattr(sampler, "shuffle", False)
    )
    return Order(name, blocks, rows, size, None) if full else None


def expected_reads(order: Order, cached: int) -> float:
    """Blocks read in an epoch of ``order`` by a cache that holds ``cached`` blocks."""
    span = order.span
    if cached >= span:
        return 0.0
    touched = span * (1.0 - (1.0 - 1.0 / span) ** order.batch_size)
    # A batch reads its blocks in ascending order: where they outnumber the cache, each
    # evicts what the next batch could have found (LRU under a scan), so every one misses.
    missed = 1.0 if touched > cached else 1.0 - cached / span
    return order.rows / order.batch_size * touched * missed


def message(
    what: str, unit: str, order: Order, blocks: int, block_bytes: float, cache_bytes: int
) -> str | None:
    """The warning for ``order`` over ``blocks`` blocks (``unit``: what the table calls
    them) of about ``block_bytes`` each (as the cache counts them), named ``what``; None
    where the cache holds what the order needs."""
    cached = max(1, int(cache_bytes // max(block_bytes, 1.0)))
    reads = expected_reads(order, cached)
    if reads < 2 * blocks:  # about a pass or two: nothing a user would change
        return None
    needed = _size(order.span * block_bytes)
    head = (
        f"{what}: {order.name} over a table of {blocks} {unit} reads about {reads:,.0f} of "
        f"them per epoch (each about {reads / blocks:,.0f} times, against once in sequence): "
        f"the cache (cache_bytes={_size(cache_bytes)}) holds about {cached} {unit} of "
        f"{_size(block_bytes)}"
    )
    if order.window is None:
        return (
            f"{head}, and the order jumps between all {blocks}. "
            "flowloader.BlockShuffleSampler(dataset, window=8) shuffles reading each of them "
            f"about once per epoch; or raise cache_bytes to about {needed}, to hold the table."
        )
    return (
        f"{head}, fewer than the window's {order.span}. Lower the window to {cached} or "
        f"raise cache_bytes to about {needed}."
    )


def _size(nbytes: float) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{int(nbytes)} B"
