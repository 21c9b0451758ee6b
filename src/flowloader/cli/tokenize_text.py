"""Texts to token ids with a Hugging Face ``tokenizers`` file, in worker processes, in order.

Chunks of texts go to ``workers`` processes (a bounded number in flight, so memory stays flat
however long INPUT is) and come back as (lengths, ids) in INPUT's order: the token file is the
same bytes for any ``workers``. Each worker tokenizes on one thread (``TOKENIZERS_PARALLELISM``
off): the processes are the parallelism. With one worker the tokenizer runs here.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

from .bench import UsageError
from .text_documents import Chunk

# Chunks in flight per worker: enough to keep each busy while the writer catches up.
IN_FLIGHT_PER_WORKER = 3
# How often a worker looks whether the process that started it is still there.
PARENT_POLL_S = 0.2


class TextTokenizer:
    """A ``tokenizers`` tokenizer file turning a chunk of texts into (lengths, ids), with the
    id of ``eos`` (a token of the tokenizer) after each document when it is given."""

    def __init__(self, path: str, eos: str | None = None) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise UsageError(
                "--tokenizer needs Hugging Face tokenizers: pip install tokenizers"
            ) from None
        self.path, self.eos = path, eos
        try:
            self._tokenizer = Tokenizer.from_file(path)
        except Exception as error:  # tokenizers raises its own Exception for a bad file
            raise UsageError(f"{path}: not a tokenizers tokenizer file ({error})") from None
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.eos_id = None if eos is None else self._tokenizer.token_to_id(eos)
        if eos is not None and self.eos_id is None:
            raise UsageError(f"--eos {eos!r}: the tokenizer {path} has no such token")
        encode = getattr(self._tokenizer, "encode_batch_fast", None)
        self._encode = encode or self._tokenizer.encode_batch  # _fast skips the offsets

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = [encoding.ids for encoding in self._encode(texts)]
        if self.eos_id is not None:
            for ids in encodings:
                ids.append(self.eos_id)
        lengths = np.fromiter((len(ids) for ids in encodings), np.int64, len(encodings))
        flat = np.fromiter(itertools.chain.from_iterable(encodings), np.int64, int(lengths.sum()))
        return lengths, flat

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "eos": self.eos}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["eos"])  # type: ignore[misc]


def checked_texts(chunk: Chunk, column: str) -> list[str]:
    """The chunk's texts; ValueError naming the first document that is null or not text."""
    for k, value in enumerate(chunk.values):
        if not isinstance(value, str):
            what = "null" if value is None else f"{type(value).__name__}, not text"
            raise ValueError(f"{chunk.name(k)}: {column!r} is {what}")
    return chunk.values


def tokenized(
    chunks: Iterable[Chunk], tokenizer: TextTokenizer, column: str, workers: int
) -> Iterator[tuple[Chunk, np.ndarray, np.ndarray]]:
    """(chunk, lengths, ids) for each chunk, in order."""
    if workers <= 1:
        for chunk in chunks:
            yield (chunk, *tokenizer(checked_texts(chunk, column)))
        return
    context = multiprocessing.get_context("spawn")  # never fork a process running Arrow
    pool = ProcessPoolExecutor(
        workers, context, initializer=_start_worker, initargs=(tokenizer, os.getpid())
    )
    pending: collections.deque[tuple[Chunk, Future]] = collections.deque()
    try:
        for chunk in chunks:
            pending.append((chunk, pool.submit(_tokenize, checked_texts(chunk, column))))
            if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                done, future = pending.popleft()
                yield (done, *future.result())
        while pending:
            done, future = pending.popleft()
            yield (done, *future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_WORKER_TOKENIZER: TextTokenizer | None = None


def _start_worker(tokenizer: TextTokenizer, main_pid: int) -> None:
    """In each worker: one thread of tokenizing, Ctrl-C left to the parent (which stops the
    workers and keeps what is written), and an exit as soon as the parent is gone (killed,
    it cannot stop them: a pool's workers would otherwise wait for work forever)."""
    global _WORKER_TOKENIZER
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:  # spawned, so the parent is the run itself until it dies
        while os.getppid() == main_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _WORKER_TOKENIZER = tokenizer


def _tokenize(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    assert _WORKER_TOKENIZER is not None
    return _WORKER_TOKENIZER(texts)
