"""Page-locked copies made on a background thread, so that pinning overlaps the training step.

With workers, the main thread takes each batch from shared memory (cheap) and hands it to one
pinning thread; it then returns the oldest batch already pinned. ``next`` therefore waits for
a pin only when the training step was shorter than the copy. Pinned blocks come from torch's
caching host allocator, which reuses a freed block once the copies that read it have finished,
so a steady epoch allocates no new page-locked memory after its first few batches.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._compat import torch as _torch

# Batches pinned ahead of the consumer: one being copied while the loop uses the previous one.
DEPTH = 2


class PinStage:
    """A one-thread pipeline that applies ``convert`` (which pins) to batches, in order."""

    def __init__(self, convert: Callable[[Any], Any], depth: int = DEPTH) -> None:
        self._convert = convert
        self._depth = depth
        self._pending: deque[Future] = deque()
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="flowloader-pin",
            initializer=_torch.pin_thread_setup,
            initargs=(_torch.current_device(),),
        )
        # The thread ends with the iterator that owns this stage.
        weakref.finalize(self, self._executor.shutdown, False, cancel_futures=True)

    def __len__(self) -> int:
        return len(self._pending)

    def has_room(self) -> bool:
        return len(self._pending) < self._depth

    def submit(self, batch: Any) -> None:
        self._pending.append(self._executor.submit(self._convert, batch))

    def submit_error(self, error: BaseException) -> None:
        """Deliver ``error`` after the batches already submitted, as the sampler order says."""
        failed: Future = Future()
        failed.set_exception(error)
        self._pending.append(failed)

    def take(self) -> Any:
        """The oldest batch, pinned (waits for its copy); re-raises its error if it had one."""
        return self._pending.popleft().result()

    def clear(self) -> None:
        """Drop the batches not yet taken (a new epoch starts, or loading stops)."""
        for future in self._pending:
            future.cancel()
        self._pending.clear()
