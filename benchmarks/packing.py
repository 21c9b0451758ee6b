"""Token corpora and sequence packing (issue 27): ``flowloader.text``'s ``Packed`` against
Grain's packers (``grain.experimental`` ``BestFitPackIterDataset`` and
``FirstFitPackIterDataset``, 64 bins) on the same documents, nanoGPT's ``get_batch`` loop
against ``TokenWindows`` through ``flowloader.DataLoader``, and the index of a large token
file found by its end-of-document ids. A peer that is not installed is left out, and says so.

The documents are written once with ``write_tokens`` (uint16 ids, seed 0) into a cache folder
and reused: log-normal lengths (median 300 tokens, sigma 0.5: two thirds of them between 180
and 500, mean 340), 10^8 tokens in all. Grain is given the same documents already cut into
consecutive pieces of at most seq_len tokens (it cannot take longer ones), as
``Packed(long_docs="split")`` cuts them. Packing runs on one core (a child process pinned to
one CPU, threads included), each case in a fresh process: tokens/s counts the documents'
tokens over the time from building the packer to the last row read (every row is read), and
time to first row is from building it. Padding is the share of pad tokens in all rows.
``Packed`` runs with its default block of 4,096 documents, and with 1,024. Grain reads its
source with ``ReadOptions(num_threads=0)``, its fastest setting on one core; its default read
threads are measured on the first 10^7 tokens.

Through the loader: batches of 8 rows of 4,096 tokens, 2 worker processes, documents in file
order, rows/s over one epoch from building the loader. nanoGPT's loop (random offsets into a
fresh ``np.memmap`` each batch, windows stacked, cast to int64) against ``TokenWindows``
through ``flowloader.DataLoader`` (shuffle=True, the batch cast to int64 in the loop), 12
windows of 1,024 tokens. The index: a flat file of 10^9 uint16 ids without an index
(documents end with id 50256), opened with ``TokenDataset(path, eos_id=50256)``: the first
open scans it once (page cache dropped first where the system allows), a reopen loads the
cached offsets.

    python -m benchmarks.packing [--tokens 100000000] [--runs 2] [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .common import environment, median, write_json

TOKENS = 10**8
EOS_TOKENS = 10**9
QUICK_TOKENS = 2 * 10**6
QUICK_EOS_TOKENS = 10**7
GRAIN_THREADS_TOKENS = 10**7  # Grain with its default read threads: the first 10^7 tokens
SEQ_LENS = (512, 4096)
BINS = 64
MEDIAN_LENGTH, SIGMA = 300, 0.5
EOS = 50256  # GPT-2's end of text; the other ids are below it
LOADER_SEQ, LOADER_BATCH, LOADER_WORKERS = 4096, 8, 2
QUICK_LOADER_BATCHES = 20  # the full run reads the whole epoch
WINDOW_LEN, WINDOW_BATCH = 1024, 12
WINDOW_BATCHES = 10000
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "flowloader", "bench-tokens")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def grain_installed() -> bool:
    return importlib.util.find_spec("grain") is not None


def _failure(error: BaseException) -> str:
    text = " ".join(str(error).split())
    text = text if len(text) <= 90 else text[:87] + "..."
    return f"{type(error).__name__}" + (f": {text}" if text else "")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- the documents -----------------------------------------------------------------------------


def _lengths(rng: np.random.Generator, count: int) -> np.ndarray:
    drawn = rng.lognormal(np.log(MEDIAN_LENGTH), SIGMA, count)
    return np.maximum(np.rint(drawn), 1).astype(np.int64)


def _documents(tokens: int, eos: bool) -> Iterator[np.ndarray]:
    """Documents of log-normal lengths until ``tokens`` tokens (seed 0), ids below EOS; with
    ``eos``, each document's last id is EOS."""
    rng = np.random.default_rng(0)
    total = 0
    while total < tokens:
        lengths = _lengths(rng, 1 << 16)
        ids = rng.integers(0, EOS, int(lengths.sum()), dtype=np.uint16)
        ends = np.cumsum(lengths)
        if eos:
            ids[ends - 1] = EOS
        for document in np.split(ids, ends[:-1]):
            if total >= tokens:
                return
            total += len(document)
            yield document


def corpus(tokens: int) -> str:
    """The packing corpus: ``tokens`` tokens of documents, written once by write_tokens."""
    from flowloader.text import write_tokens

    path = os.path.join(CACHE, f"docs-{tokens}.bin")
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        _say(f"writing {path}")
        write_tokens(_documents(tokens, eos=False), path, dtype="uint16")
    return path


def eos_file(tokens: int) -> str:
    """A flat file of ``tokens`` ids and no index, documents ended by EOS (nanoGPT's kind)."""
    path = os.path.join(CACHE, f"eos-{tokens}.bin")
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        _say(f"writing {path}")
        with open(path + ".partial", "wb") as out:
            batch: list[np.ndarray] = []
            for document in _documents(tokens, eos=True):
                batch.append(document)
                if len(batch) == 1 << 16:
                    np.concatenate(batch).tofile(out)
                    batch = []
            if batch:
                np.concatenate(batch).tofile(out)
        os.replace(path + ".partial", path)
    return path


def _offsets(path: str) -> np.ndarray:
    """The document offsets write_tokens put beside ``path`` (read without flowloader)."""
    return np.load(path + ".idx.npy")


def _pieces(offsets: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) in the file of every piece of at most seq_len tokens, documents cut into
    consecutive pieces, in document order."""
    lengths = np.diff(offsets)
    counts = np.maximum(-(-lengths // seq_len), 1)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    starts = np.repeat(offsets[:-1], counts) + (np.arange(int(counts.sum())) - first) * seq_len
    ends = np.minimum(starts + seq_len, np.repeat(offsets[1:], counts))
    return starts, ends


class Pieces:
    """Grain's source: piece i is ``{"tokens": ids}``, a view of the file's memory map (the
    map reopens in each process, and is never pickled)."""

    def __init__(self, path: str, starts: np.ndarray, ends: np.ndarray) -> None:
        self.path, self.starts, self.ends = path, starts, ends
        self._tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if self._tokens is None:
            self._tokens = np.memmap(self.path, dtype=np.uint16, mode="r")
        return {"tokens": self._tokens[self.starts[i] : self.ends[i]]}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}


def grain_packed(
    path: str, seq_len: int, method: str, threads: bool = False, limit: int | None = None
) -> Any:
    """Grain's packer over the documents of ``path`` cut to seq_len (the first ``limit``
    tokens' pieces when given)."""
    import grain
    import grain.experimental

    starts, ends = _pieces(_offsets(path), seq_len)
    if limit is not None:
        keep = int(np.searchsorted(np.cumsum(ends - starts), limit)) + 1
        starts, ends = starts[:keep], ends[:keep]
    options = None if threads else grain.ReadOptions(num_threads=0)
    source = grain.MapDataset.source(Pieces(path, starts, ends)).to_iter_dataset(options)
    packer = {
        "best_fit": grain.experimental.BestFitPackIterDataset,
        "first_fit": grain.experimental.FirstFitPackIterDataset,
    }[method]
    return packer(source, length_struct={"tokens": seq_len}, num_packing_bins=BINS)


# -- 1. packing on one core, each case in a fresh process ------------------------------------


def pack_child(spec: dict[str, Any]) -> dict[str, Any]:
    """One packer over every row, pinned to one CPU. Run in a fresh process."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # threads included
    path, seq_len, method = spec["path"], spec["seq_len"], spec["method"]
    if spec["library"] == "flowloader":
        from flowloader.text import Packed, TokenDataset

        dataset = TokenDataset(path)
        start = time.perf_counter()
        blocks = {"block": spec["block"]} if "block" in spec else {}
        packed = Packed(dataset, seq_len, method=method, **blocks)
        built = time.perf_counter() - start
        packed[0]
        first = time.perf_counter() - start
        for r in range(1, len(packed)):
            packed[r]
        seconds = time.perf_counter() - start
        audit = packed.audit()  # every token once; not timed
        tokens, rows = audit["tokens"], audit["rows"]
        extra = {"build_s": built}
    else:
        import grain  # noqa: F401  (imported before the clock starts)

        limit = spec.get("limit")
        offsets = _offsets(path)
        tokens = int(offsets[-1]) if limit is None else None
        start = time.perf_counter()
        iterator = iter(grain_packed(path, seq_len, method, spec.get("threads", False), limit))
        next(iterator)
        first = time.perf_counter() - start
        rows = 1
        for _ in iterator:
            rows += 1
        seconds = time.perf_counter() - start
        if limit is not None:
            starts, ends = _pieces(offsets, seq_len)
            keep = int(np.searchsorted(np.cumsum(ends - starts), limit)) + 1
            tokens = int((ends[:keep] - starts[:keep]).sum())
        extra = {}
    assert tokens is not None
    return {
        "tokens": tokens,
        "rows": rows,
        "seconds": seconds,
        "first_row_s": first,
        "tokens_per_s": tokens / seconds,
        "padding": 1 - tokens / (rows * seq_len),
        **extra,
    }


def _in_child(spec: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.packing", "--pack-child", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"failed": tail[:120]}
    return json.loads(lines[-1])


THREADED = "Grain BestFitPackIterDataset, default read threads"
PACKERS = [  # (name, library, method, extra spec)
    ("flowloader Packed best_fit", "flowloader", "best_fit", {}),
    ("flowloader Packed first_fit", "flowloader", "first_fit", {}),
    ("flowloader Packed best_fit, block=1024", "flowloader", "best_fit", {"block": 1024}),
    ("Grain BestFitPackIterDataset", "grain", "best_fit", {}),
    ("Grain FirstFitPackIterDataset", "grain", "first_fit", {}),
]


def one_core(path: str, runs: int, quick: bool) -> list[dict[str, Any]]:
    rows = []
    for seq_len in SEQ_LENS:
        limit = GRAIN_THREADS_TOKENS // (100 if quick else 1)
        cases = [
            *PACKERS,
            (THREADED, "grain", "best_fit", {"threads": True, "limit": limit}),
        ]
        found: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in cases}
        for run in range(runs):
            for name, library, method, extra in cases:
                if library == "grain" and not grain_installed():
                    continue
                if extra.get("threads") and run:  # measured once: it is only a reference
                    continue
                _say(f"one core: seq_len {seq_len}, {name}, run {run + 1}")
                spec = {
                    "library": library,
                    "method": method,
                    "seq_len": seq_len,
                    "path": path,
                    **extra,
                }
                found[name].append(_in_child(spec))
        for name, library, _, extra in cases:
            row: dict[str, Any] = {"seq_len": seq_len, "packer": name}
            rows.append(row)
            if library == "grain" and not grain_installed():
                row["skipped"] = "grain is not installed"
                continue
            failed = [r["failed"] for r in found[name] if "failed" in r]
            if failed:
                row["failed"] = failed[0]
                continue
            results = found[name]
            row.update(
                runs=[r["tokens_per_s"] for r in results],
                tokens_per_s=median([r["tokens_per_s"] for r in results]),
                first_row_s=median([r["first_row_s"] for r in results]),
                padding=results[0]["padding"],
                rows=results[0]["rows"],
                tokens=results[0]["tokens"],
                partial="limit" in extra,
            )
            if "build_s" in results[0]:
                row["build_s"] = median([r["build_s"] for r in results])
    return rows


# -- 2. through the loader: 2 workers, batches of 8 x 4,096 ----------------------------------


def _timed_batches(make: Callable[[], Any], batches: int | None) -> tuple[float, float, int]:
    """(rows/s, seconds to the first batch, rows) over the first ``batches`` batches (None:
    all) of the iterable ``make()`` builds, timed from building it."""
    start = time.perf_counter()
    iterator = iter(make())
    first = 0.0
    rows = 0
    try:
        for b in itertools.count() if batches is None else range(batches):
            try:
                batch = next(iterator)
            except StopIteration:
                break
            rows += len(batch["tokens"])
            if b == 0:
                first = time.perf_counter() - start
        seconds = time.perf_counter() - start
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()
        del iterator
    return rows / seconds, first, rows


def through_loader(path: str, runs: int, batches: int | None) -> dict[str, Any]:
    import flowloader
    from flowloader.text import Packed, TokenDataset, collate_packed

    dataset = TokenDataset(path)

    def ours(collate: Any = None) -> Callable[[], Any]:
        def make() -> Any:
            packed = Packed(dataset, LOADER_SEQ)
            return flowloader.DataLoader(
                packed, LOADER_BATCH, num_workers=LOADER_WORKERS, collate_fn=collate
            )

        return make

    def grain_loader() -> Any:
        import grain

        packed = grain_packed(path, LOADER_SEQ, "best_fit")
        options = grain.MultiprocessingOptions(num_workers=LOADER_WORKERS)
        return packed.batch(LOADER_BATCH).mp_prefetch(options)

    measures: dict[str, Callable[[], Any]] = {
        "flowloader Packed (best_fit), default collate": ours(),
        "flowloader Packed (best_fit), collate_packed": ours(collate_packed),
    }
    missing = None
    if grain_installed():
        measures["Grain BestFitPackIterDataset + batch + mp_prefetch"] = grain_loader
    else:
        missing = "grain is not installed"
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in measures}
    failed: dict[str, str] = {}
    for run in range(runs):
        for name, make in measures.items():
            if name in failed:
                continue
            _say(f"loader: {name}, run {run + 1}")
            try:
                results[name].append(_timed_batches(make, batches))
            except Exception as error:  # a peer's failure is a result, not a crash
                failed[name] = _failure(error)
    return {"results": results, "failed": failed, "missing": missing, "batches": batches}


# -- 3. nanoGPT's get_batch against TokenWindows ---------------------------------------------


def get_batch(
    path: str, rng: np.random.Generator, batch: int, seq_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """nanoGPT's way: a fresh memory map each batch, random offsets, the windows stacked."""
    data = np.memmap(path, dtype=np.uint16, mode="r")
    starts = rng.integers(0, len(data) - seq_len, batch)
    inputs = np.stack([data[s : s + seq_len] for s in starts]).astype(np.int64)
    targets = np.stack([data[s + 1 : s + 1 + seq_len] for s in starts]).astype(np.int64)
    return inputs, targets


def windows(path: str, runs: int, batches: int) -> dict[str, list[float]]:
    import flowloader
    from flowloader.text import TokenWindows

    def nanogpt() -> float:
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for _ in range(batches):
            get_batch(path, rng, WINDOW_BATCH, WINDOW_LEN)
        return batches / (time.perf_counter() - start)

    def ours(workers: int) -> Callable[[], float]:
        def measure() -> float:
            start = time.perf_counter()
            loader = flowloader.DataLoader(
                TokenWindows(path, WINDOW_LEN),
                WINDOW_BATCH,
                shuffle=True,
                num_workers=workers,
            )
            done = 0
            for batch in loader:
                batch["inputs"].astype(np.int64)
                batch["targets"].astype(np.int64)
                done += 1
                if done == batches:
                    break
            return done / (time.perf_counter() - start)

        return measure

    measures = {
        "nanoGPT get_batch loop (np.memmap)": nanogpt,
        "TokenWindows, num_workers=0": ours(0),
        "TokenWindows, num_workers=2": ours(2),
    }
    results: dict[str, list[float]] = {name: [] for name in measures}
    for run in range(runs):
        for name, measure in measures.items():
            _say(f"windows: {name}, run {run + 1}")
            results[name].append(measure())
    return results


# -- 4. the index of a large file from its end-of-document ids -------------------------------


def _drop_cache(path: str) -> bool:
    """Ask the kernel to forget the file's pages (no root needed for clean pages)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def _remove_scans(path: str) -> None:
    from flowloader.text import index as _index

    for stem in _index._scan_stems(path, EOS, None, None):
        for suffix in (".npy", ".json"):
            if os.path.exists(stem + suffix):
                os.remove(stem + suffix)


def _read_speed(path: str) -> float:
    """MB/s of one plain sequential read of the file, 64 MB at a time."""
    buffer = bytearray(64 << 20)
    start = time.perf_counter()
    with open(path, "rb", buffering=0) as stream:
        while stream.readinto(buffer):
            pass
    return os.path.getsize(path) / 1e6 / (time.perf_counter() - start)


def eos_index(path: str, runs: int) -> dict[str, Any]:
    from flowloader.text import TokenDataset

    size = os.path.getsize(path)
    record: dict[str, Any] = {"tokens": size // 2, "bytes": size}

    def first_open() -> float:
        _remove_scans(path)
        start = time.perf_counter()
        TokenDataset(path, dtype="uint16", eos_id=EOS)
        return time.perf_counter() - start

    _say("index: cold scan, cold read")
    record["dropped"] = _drop_cache(path)
    record["cold_first_open_s"] = first_open()
    _drop_cache(path)
    record["cold_read_mb_s"] = _read_speed(path)
    _say("index: warm read, warm scans, reopens")
    record["warm_read_mb_s"] = _read_speed(path)
    record["warm_first_open_s"] = median([first_open() for _ in range(runs)])
    reopens = []
    for _ in range(max(runs, 3)):
        start = time.perf_counter()
        dataset = TokenDataset(path, dtype="uint16", eos_id=EOS)
        reopens.append(time.perf_counter() - start)
    record["reopen_s"] = median(reopens)
    record["documents"] = len(dataset)
    return record


# -- the record and its tables ---------------------------------------------------------------


def run(
    tokens: int = TOKENS, runs: int = 2, quick: bool = False, eos_tokens: int = EOS_TOKENS
) -> dict[str, Any]:
    path = corpus(tokens)
    lengths = np.diff(_offsets(path))
    started = time.perf_counter()
    record: dict[str, Any] = {
        "tokens": int(lengths.sum()),
        "documents": len(lengths),
        "mean_length": float(lengths.mean()),
        "longer": {s: float((lengths > s).mean()) for s in SEQ_LENS},
        "missing": None if grain_installed() else "grain",
        "one_core": one_core(path, runs, quick),
        "loader": through_loader(path, 1 if quick else 3, QUICK_LOADER_BATCHES if quick else None),
        "windows": windows(path, 1 if quick else 3, 200 if quick else WINDOW_BATCHES),
        "index": eos_index(eos_file(eos_tokens), 1 if quick else 3),
    }
    record["seconds"] = time.perf_counter() - started
    return record


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.1f}x" if theirs else "n/a"


def table(record: dict[str, Any]) -> str:
    out = []
    if record["missing"]:
        out += ["Not installed here, so left out: Grain (`pip install grain`).", ""]
    out += [
        f"**Packing on one core**: {record['documents']:,} documents, {record['tokens']:,} "
        f"tokens (mean {record['mean_length']:.0f}; "
        + ", ".join(f"{share:.1%} longer than {s:,}" for s, share in record["longer"].items())
        + "). Tokens/s from building the packer to the last row read; medians over "
        + f"{len(next((r['runs'] for r in record['one_core'] if 'runs' in r), [0]))} "
        "fresh processes.",
        "",
        "| seq_len | packer | M tokens/s | padding | rows | first row s | runs (M tokens/s) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    best: dict[tuple[int, str], dict[str, Any]] = {}
    for row in record["one_core"]:
        head = f"| {row['seq_len']:,} | {row['packer']} |"
        if "skipped" in row:
            continue
        if "failed" in row:
            out.append(f"{head} failed: {row['failed']} | | | | |")
            continue
        best[(row["seq_len"], row["packer"])] = row
        padding = f"{row['padding']:.3%}"
        if row["partial"]:
            head = f"| {row['seq_len']:,} | {row['packer']}, first {row['tokens']:,} tokens |"
            padding = "—"
        shown = ", ".join(f"{v / 1e6:.2f}" for v in row["runs"])
        out.append(
            f"{head} {row['tokens_per_s'] / 1e6:.2f} | {padding} | {row['rows']:,} | "
            f"{row['first_row_s']:.3f} | {shown} |"
        )
    targets = []
    for seq_len in SEQ_LENS:
        ours = best.get((seq_len, "flowloader Packed best_fit"))
        theirs = best.get((seq_len, "Grain BestFitPackIterDataset"))
        small_block = best.get((seq_len, "flowloader Packed best_fit, block=1024"))
        slow = best.get((seq_len, THREADED))
        if not (ours and theirs):
            continue
        parts = [
            f"padding {ours['padding']:.3%} against Grain's {theirs['padding']:.3%} "
            f"(**{ours['padding'] / theirs['padding']:.2f}x**, target <= 0.5x), tokens/s "
            f"**{_ratio(ours['tokens_per_s'], theirs['tokens_per_s'])}** Grain's (target >= 10x)"
        ]
        if slow:
            parts.append(
                f"**{_ratio(ours['tokens_per_s'], slow['tokens_per_s'])}** Grain's with its "
                "default read threads"
            )
        if small_block:
            parts.append(
                f"with block=1024, padding {small_block['padding']:.3%} "
                f"(**{small_block['padding'] / theirs['padding']:.2f}x**) at "
                f"**{_ratio(small_block['tokens_per_s'], theirs['tokens_per_s'])}** Grain's "
                "tokens/s"
            )
        targets.append(f"seq_len {seq_len:,}: " + "; ".join(parts))
    if targets:
        out += ["", "Best fit against Grain's best fit, " + ". ".join(targets) + "."]
    builds = [
        f"{row['build_s']:.2f} s at seq_len {row['seq_len']:,} "
        f"({row['packer'].removeprefix('flowloader Packed ')})"
        for row in record["one_core"]
        if "build_s" in row
    ]
    if builds:
        out += [
            "",
            "Of flowloader's time, building `Packed` (every block planned once to count its "
            "rows) took " + ", ".join(builds) + ".",
        ]

    loader = record["loader"]
    rates = {
        name: median([r[0] for r in values]) for name, values in loader["results"].items() if values
    }
    out += [
        "",
        f"**Through the loader**: {LOADER_WORKERS} worker processes, batches of {LOADER_BATCH} "
        f"rows of {LOADER_SEQ:,} tokens, "
        + ("one epoch" if loader["batches"] is None else f"the first {loader['batches']} batches")
        + " timed from building the loader (medians of interleaved runs):",
        "",
        "| loader | rows/s | rows | first batch s | runs (rows/s) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, values in loader["results"].items():
        if name in loader["failed"]:
            out.append(f"| {name} | failed: {loader['failed'][name]} | | | |")
            continue
        if not values:
            continue
        shown = ", ".join(f"{v[0]:,.0f}" for v in values)
        first = median([v[1] for v in values])
        out.append(f"| {name} | {rates[name]:,.0f} | {values[0][2]:,} | {first:.3f} | {shown} |")
    grain_rate = rates.get("Grain BestFitPackIterDataset + batch + mp_prefetch")
    if grain_rate:
        ours_rate = rates["flowloader Packed (best_fit), default collate"]
        out += ["", f"flowloader / Grain: **{_ratio(ours_rate, grain_rate)}** (target >= 1.5x)"]

    window_rates = {name: median(values) for name, values in record["windows"].items()}
    out += [
        "",
        f"**nanoGPT windows**: batches of {WINDOW_BATCH} windows of {WINDOW_LEN:,} tokens "
        "(inputs and targets, int64), from the start of each run (medians of interleaved runs):",
        "",
        "| reader | batches/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, values in record["windows"].items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        out.append(f"| {name} | {window_rates[name]:,.0f} | {shown} |")
    theirs = window_rates["nanoGPT get_batch loop (np.memmap)"]
    out += [
        "",
        "TokenWindows / get_batch: "
        + ", ".join(
            f"**{_ratio(window_rates[name], theirs)}** at {name.split(', ')[1]}"
            for name in window_rates
            if name.startswith("TokenWindows")
        )
        + " (target >= 1x)",
    ]

    index = record["index"]
    cold = "page cache dropped first" if index["dropped"] else "page cache could not be dropped"
    out += [
        "",
        f"**Index from end-of-document ids**: {index['tokens']:,} uint16 tokens "
        f"({index['bytes'] / 1e9:.1f} GB, {index['documents']:,} documents), "
        "`TokenDataset(path, dtype='uint16', eos_id=50256)`:",
        "",
        "| | seconds | MB/s | plain read of the file, MB/s |",
        "| --- | ---: | ---: | ---: |",
        f"| first open, {cold} | {index['cold_first_open_s']:.2f} | "
        f"{index['bytes'] / 1e6 / index['cold_first_open_s']:,.0f} | "
        f"{index['cold_read_mb_s']:,.0f} |",
        f"| first open, file in the page cache | {index['warm_first_open_s']:.2f} | "
        f"{index['bytes'] / 1e6 / index['warm_first_open_s']:,.0f} | "
        f"{index['warm_read_mb_s']:,.0f} |",
        f"| reopen (cached index) | {index['reopen_s']:.4f} | | |",
    ]
    return "\n".join(out)


def section(quick: bool = False) -> str:
    if quick:
        return table(run(QUICK_TOKENS, runs=1, quick=True, eos_tokens=QUICK_EOS_TOKENS))
    return table(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=TOKENS)
    parser.add_argument("--eos-tokens", type=int, default=EOS_TOKENS)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true", help="2·10^6 tokens (10^7 for the index), 1 run"
    )
    parser.add_argument("--json")
    parser.add_argument("--pack-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pack_child:
        print(json.dumps(pack_child(json.loads(args.pack_child))))
        return
    print(environment())
    if args.quick:
        record = run(QUICK_TOKENS, runs=1, quick=True, eos_tokens=QUICK_EOS_TOKENS)
    else:
        record = run(args.tokens, args.runs, eos_tokens=args.eos_tokens)
    print(table(record))
    print(f"\n({record['seconds']:.0f} s)")
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
