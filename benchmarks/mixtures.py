"""Weighted mixtures (issue 26): flowloader's ``Mixture`` against torchdata.nodes'
``MultiNodeWeightedSampler``, Hugging Face datasets' ``interleave_datasets`` (with
``probabilities=``) and Grain's ``MapDataset.mix``, on the same sources and weights. Each sample
is its source's number, so every mixture's order of sources can be read off; flowloader's
comes from ``mix.locate_many``. A peer that is not installed is left out, and says so.

Weights: 2 sources at 0.999 and 0.001; 10 and 50 sources, one at 0.001 and the others
geometric (the largest 100x the smallest) sharing 0.999. Each source holds 1.2·N·w + 64
samples and every mixture stops when its first source runs out, so each gives at least the N
positions measured. Prefix fidelity is the largest |count_s(n) - n·w_s| over every source and
every prefix n <= N; windows are all runs of 1,000 consecutive positions. Plans at 1,000
sources (weights w_k ∝ 1/k) are built in a fresh process each, with tracemalloc's peak and
the growth of peak RSS. Resume trials save a state part-way and load it into a loader with
another num_workers, world size or set of weights, on 3 small sources read in order.

The last table reads two halves of one ImageFolder (``flowloader.Subset``) as a 50/50 Mixture
through ``flowloader.DataLoader`` (ImageNet training transform, batch 64, 2 workers) against
the whole ImageFolder shuffled, in interleaved epochs over flowloader bench's 2,000 JPEGs.

    python -m benchmarks.mixtures [--positions 1000000] [--runs 5] [--quick] [--json F]
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
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from .common import environment, median, write_json
from .mixture_resume import LIBRARIES, PEERS, failure_text, installed, resume_trials

POSITIONS = 10**6
WINDOW = 1_000
SOURCE_COUNTS = (2, 10, 50)
PLAN_SOURCES = 1_000
PLAN_POSITIONS = 10**9
HF_PLAN_POSITIONS = 10**6  # interleave_datasets stores one row index per position
BATCH = 64


def import_first(library: str) -> None:
    """Import what a library's mixture needs, so that no timing includes its imports."""
    modules = {
        "flowloader": ["flowloader", "flowloader.mixture"],
        "torchdata.nodes": ["torch", "torchdata.nodes", "torchdata.nodes.samplers.stop_criteria"],
        "HF datasets": ["datasets", "pyarrow"],
        "Grain": ["grain"],
    }[library]
    for module in modules:
        importlib.import_module(module)


# -- weights and sources ---------------------------------------------------------------------


def mixture_weights(count: int) -> np.ndarray:
    """One source at 0.001, the rest geometric (largest / smallest = 100) sharing 0.999."""
    if count == 2:
        return np.array([0.999, 0.001])
    ratio = 0.01 ** (1 / (count - 2))
    rest = ratio ** np.arange(count - 1)
    return np.concatenate([rest / rest.sum() * 0.999, [0.001]])


def zipf_weights(count: int) -> np.ndarray:
    raw = 1 / np.arange(1, count + 1)
    return raw / raw.sum()


def source_sizes(weights: np.ndarray, positions: int) -> list[int]:
    """Enough samples in every source for ``positions`` positions of any of the mixtures."""
    return [int(n) for n in np.ceil(1.2 * positions * weights).astype(np.int64) + 64]


# -- each library's order of sources ---------------------------------------------------------
# Each takes (weights, sizes, positions) and returns the first ``positions`` source numbers
# (fewer if the mixture is shorter), timed from building the mixture.


def flowloader_order(weights: np.ndarray, sizes: list[int], positions: int) -> np.ndarray:
    from flowloader import Mixture

    names = [str(s) for s in range(len(sizes))]
    mix = Mixture(
        {name: range(n) for name, n in zip(names, sizes, strict=True)},
        dict(zip(names, weights.tolist(), strict=True)),
        seed=0,
    )
    return mix.locate_many(np.arange(min(positions, len(mix))))[0]


def torchdata_nodes(sizes: list[int]) -> dict[str, Any]:
    from torchdata.nodes import IterableWrapper

    return {str(s): IterableWrapper(itertools.repeat(s, n)) for s, n in enumerate(sizes)}


def torchdata_sampler(nodes: dict[str, Any], weights: np.ndarray) -> Any:
    from torchdata.nodes import MultiNodeWeightedSampler
    from torchdata.nodes.samplers.stop_criteria import StopCriteria

    return MultiNodeWeightedSampler(
        nodes,
        {str(s): float(w) for s, w in enumerate(weights)},
        stop_criteria=StopCriteria.FIRST_DATASET_EXHAUSTED,
        rank=0,
        world_size=1,
        seed=0,
    )


def torchdata_order(weights: np.ndarray, sizes: list[int], positions: int) -> np.ndarray:
    sampler = torchdata_sampler(torchdata_nodes(sizes), weights)
    return np.fromiter(itertools.islice(sampler, positions), dtype=np.int64)


def hf_sources(sizes: list[int]) -> list[Any]:
    import datasets

    datasets.disable_progress_bars()
    return [
        datasets.Dataset.from_dict({"source": np.full(n, s, dtype=np.int64)})
        for s, n in enumerate(sizes)
    ]


def hf_interleave(parts: list[Any], weights: np.ndarray) -> Any:
    import datasets

    return datasets.interleave_datasets(
        parts, probabilities=weights.tolist(), seed=0, stopping_strategy="first_exhausted"
    )


def hf_order(parts: list[Any], weights: np.ndarray, positions: int) -> np.ndarray:
    mixed = hf_interleave(parts, weights)
    table = mixed.with_format("arrow")[: min(positions, len(mixed))]
    return np.asarray(table["source"].to_numpy(), dtype=np.int64)


def grain_mix(weights: np.ndarray, sizes: list[int]) -> Any:
    import grain

    return grain.MapDataset.mix(
        [grain.MapDataset.source([s] * n) for s, n in enumerate(sizes)], weights.tolist()
    )


def grain_order(weights: np.ndarray, sizes: list[int], positions: int) -> np.ndarray:
    mixed = grain_mix(weights, sizes)
    count = min(positions, len(mixed))
    return np.fromiter((mixed[i] for i in range(count)), dtype=np.int64, count=count)


def deviations(order: np.ndarray, weights: np.ndarray, window: int = WINDOW) -> tuple[float, float]:
    """(largest |count_s(n) - n·w_s| over sources and prefixes n, the same over every run of
    ``window`` consecutive positions)."""
    n = np.arange(1, len(order) + 1, dtype=np.float64)
    prefix = windows = 0.0
    for s, w in enumerate(weights.tolist()):
        counts = np.cumsum(order == s)
        prefix = max(prefix, float(np.abs(counts - n * w).max()))
        if len(order) >= window:
            padded = np.concatenate([[0], counts])
            runs = padded[window:] - padded[:-window]
            windows = max(windows, float(np.abs(runs - window * w).max()))
    return prefix, windows


def fidelity(positions: int) -> list[dict[str, Any]]:
    rows = []
    for count in SOURCE_COUNTS:
        weights = mixture_weights(count)
        sizes = source_sizes(weights, positions)
        for library in LIBRARIES:
            row: dict[str, Any] = {"sources": count, "library": library}
            rows.append(row)
            if not installed(library):
                row["skipped"] = f"{PEERS[library]} is not installed"
                continue
            print(f"fidelity: {count} sources, {library}", file=sys.stderr, flush=True)
            try:
                import_first(library)
                if library == "HF datasets":
                    parts = hf_sources(sizes)  # the sources, not timed
                    start = time.perf_counter()
                    order = hf_order(parts, weights, positions)
                else:
                    make = {
                        "flowloader": flowloader_order,
                        "torchdata.nodes": torchdata_order,
                        "Grain": grain_order,
                    }[library]
                    start = time.perf_counter()
                    order = make(weights, sizes, positions)
                seconds = time.perf_counter() - start
            except Exception as error:  # a peer's failure is a result, not a crash
                row["failed"] = failure_text(error)
                continue
            prefix, windows = deviations(order, weights)
            row.update(
                positions=len(order),
                prefix=prefix,
                window=windows,
                us_per_position=seconds / max(len(order), 1) * 1e6,
            )
        iid = weights * (1 - weights)
        rows.append(
            {
                "sources": count,
                "library": "i.i.d. draws, 3 sigma",
                "positions": positions,
                "prefix": float(3 * np.sqrt(positions * iid).max()),
                "window": float(3 * np.sqrt(WINDOW * iid).max()),
            }
        )
    return rows


# -- plans at 1,000 sources, each in a fresh process -----------------------------------------


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def plan_child(library: str) -> dict[str, Any]:
    """Build one library's mixture over 1,000 sources; what it cost. Run in a fresh process."""
    weights = zipf_weights(PLAN_SOURCES)
    positions = HF_PLAN_POSITIONS if library == "HF datasets" else PLAN_POSITIONS
    sizes = source_sizes(weights, positions)
    build: Callable[[], Any]
    if library == "flowloader":
        from flowloader import Mixture

        names = [str(s) for s in range(PLAN_SOURCES)]
        sources = {name: range(n) for name, n in zip(names, sizes, strict=True)}
        mapping = dict(zip(names, weights.tolist(), strict=True))

        def build() -> Any:
            mix = Mixture(sources, mapping, seed=0)
            mix.locate(0)
            return mix

        what = f"Mixture of {positions:,} positions, and locate(0)"
    elif library == "torchdata.nodes":
        nodes = torchdata_nodes(sizes)

        def build() -> Any:
            sampler = torchdata_sampler(nodes, weights)
            next(sampler)
            return sampler

        what = "MultiNodeWeightedSampler (lazy, random draws), and its first item"
    elif library == "HF datasets":
        parts = hf_sources(sizes)

        def build() -> Any:
            return hf_interleave(parts, weights)

        what = f"interleave_datasets of {positions:,} positions (one row index each)"
    else:
        import grain

        sources = [grain.MapDataset.source(range(n)) for n in sizes]

        def build() -> Any:
            mixed = grain.MapDataset.mix(sources, weights.tolist())
            mixed[0]
            return mixed

        what = f"MapDataset.mix of {positions:,} positions (lazy), and its first item"
    # First build: time and peak RSS, as a user's first build in a process sees them.
    rss_before = _status_kb("VmRSS")
    peak_resettable = _reset_peak_rss()
    start = time.perf_counter()
    built = build()
    seconds = time.perf_counter() - start
    rss_peak = _status_kb("VmHWM") if peak_resettable else None
    del built
    # Second build under tracemalloc (which slows allocation, so it is not timed).
    tracemalloc.start()
    built = build()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del built
    return {
        "library": library,
        "what": what,
        "seconds": seconds,
        "tracemalloc_peak_mb": peak / 1e6,
        "rss_peak_growth_mb": (
            (rss_peak - rss_before) / 1e3 if rss_peak is not None and rss_before else None
        ),
    }


def plans() -> list[dict[str, Any]]:
    rows = []
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for library in LIBRARIES:
        if not installed(library):
            rows.append({"library": library, "skipped": f"{PEERS[library]} is not installed"})
            continue
        print(f"plan: {library}", file=sys.stderr, flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.mixtures", "--plan-child", library],
            cwd=root,
            capture_output=True,
            text=True,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            rows.append({"library": library, "failed": tail[:120]})
        else:
            rows.append(json.loads(lines[-1]))
    return rows


# -- cost per position at 1,000 sources ------------------------------------------------------


def costs(quick: bool) -> list[dict[str, Any]]:
    """Microseconds per position of each library's order of sources at 1,000 sources."""
    weights = zipf_weights(PLAN_SOURCES)
    rows: list[dict[str, Any]] = []

    def timed(library: str, how: str, count: int, run: Callable[[], Any]) -> None:
        if not installed(library):
            rows.append({"library": library, "skipped": f"{PEERS[library]} is not installed"})
            return
        print(f"cost: {library}, {how}", file=sys.stderr, flush=True)
        try:
            import_first(library)
            start = time.perf_counter()
            run()
            seconds = time.perf_counter() - start
        except Exception as error:
            rows.append({"library": library, "how": how, "failed": failure_text(error)})
            return
        rows.append(
            {"library": library, "how": how, "positions": count, "us": seconds / count * 1e6}
        )

    scale = 10 if quick else 1
    big = source_sizes(weights, PLAN_POSITIONS)
    mix: Any = None

    def build() -> None:
        nonlocal mix
        from flowloader import Mixture

        mix = Mixture({str(s): range(n) for s, n in enumerate(big)}, weights.tolist(), seed=0)

    if installed("flowloader"):
        build()
        middle = len(mix) // 2
        batches = 400 // scale
        mix.locate_many(np.arange(256) + middle)  # warm

        def in_batches() -> None:
            for b in range(batches):
                mix.locate_many(np.arange(256 * b, 256 * (b + 1)) + middle)

        bulk = 10**6 // scale
        timed("flowloader", "locate_many, batches of 256", 256 * batches, in_batches)
        timed(
            "flowloader",
            f"locate_many, one call of {bulk:,}",
            bulk,
            lambda: mix.locate_many(np.arange(bulk) + middle),
        )
    small = 10**5 // scale
    timed(
        "torchdata.nodes",
        "next() per position",
        small,
        lambda: torchdata_order(weights, source_sizes(weights, small), small),
    )
    if installed("HF datasets"):
        parts = hf_sources(source_sizes(weights, 10**6 // scale))
        timed(
            "HF datasets",
            "interleave_datasets + reading the tag column",
            10**6 // scale,
            lambda: hf_order(parts, weights, 10**6 // scale),
        )
    else:
        rows.append({"library": "HF datasets", "skipped": "datasets is not installed"})
    few = 10**4 // scale
    timed(
        "Grain",
        "mixed[i] per position",
        few,
        lambda: grain_order(weights, source_sizes(weights, few), few),
    )
    return rows


# -- two ImageFolder halves through the loader -----------------------------------------------


def halves(runs: int, workers: int = 2) -> dict[str, list[float]]:
    import flowloader
    from flowloader import Mixture
    from flowloader.cli import pipelines, sample_data
    from flowloader.vision import datasets, transforms

    root = sample_data.builtin("imagenet-like")

    def folder() -> Any:
        return datasets.ImageFolder(
            root, transform=pipelines.transform("imagenet-train", transforms)
        )

    def epoch(make: Callable[[], Any]) -> float:
        start, samples = time.perf_counter(), 0
        for images, _ in make():
            samples += len(images)
        return samples / (time.perf_counter() - start)

    def single() -> Any:
        return flowloader.DataLoader(folder(), BATCH, shuffle=True, num_workers=workers)

    def two_halves() -> Any:
        whole = folder()
        half = len(whole) // 2
        mix = Mixture(
            {
                "first": flowloader.Subset(whole, range(half)),
                "second": flowloader.Subset(whole, range(half, len(whole))),
            },
            {"first": 0.5, "second": 0.5},
            seed=0,
        )
        return flowloader.DataLoader(mix, BATCH, num_workers=workers)

    measures = {"ImageFolder": single, "Mixture of two Subset halves": two_halves}
    results: dict[str, list[float]] = {name: [] for name in measures}
    print("halves", file=sys.stderr, flush=True)
    epoch(single)  # page cache and pools warm for both
    for _ in range(runs):
        for name, make in measures.items():
            results[name].append(epoch(make))
    return results


# -- the record and its tables ---------------------------------------------------------------


def run(positions: int = POSITIONS, runs: int = 5, quick: bool = False) -> dict[str, Any]:
    return {
        "positions": positions,
        "missing": [library for library in LIBRARIES if not installed(library)],
        "fidelity": fidelity(positions),
        "plans": plans(),
        "costs": costs(quick),
        "resume": resume_trials(),
        "halves": halves(runs),
    }


def table(record: dict[str, Any]) -> str:
    out = []
    if record["missing"]:
        out += [
            "Not installed here, so left out: "
            + ", ".join(f"{m} (`pip install {PEERS[m]}`)" for m in record["missing"])
            + ".",
            "",
        ]
    out += [
        f"**Proportions** over the first {record['positions']:,} positions (fewer where "
        "the column says so): the largest |count_s(n) - n·w_s| over every source and prefix, "
        f"and over every window of {WINDOW:,} positions; microseconds per position to build "
        "the mixture and produce its order of sources.",
        "",
        "| sources | library | positions | max over prefixes | max over 1,000-windows | "
        "us per position |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in record["fidelity"]:
        head = f"| {row['sources']} | {row['library']} |"
        if "skipped" in row:
            continue
        if "failed" in row:
            out.append(f"{head} failed: {row['failed']} | | | |")
            continue
        cost = f"{row['us_per_position']:.2f}" if "us_per_position" in row else ""
        out.append(
            f"{head} {row['positions']:,} | {row['prefix']:.2f} | {row['window']:.2f} | {cost} |"
        )
    out += [
        "",
        f"**Plans at {PLAN_SOURCES:,} sources** (weights ∝ 1/k), each built in a fresh process:",
        "",
        "| library | what is built | seconds | tracemalloc peak MB | peak RSS growth MB |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for row in record["plans"]:
        if "skipped" in row:
            continue
        if "failed" in row:
            out.append(f"| {row['library']} | failed: {row['failed']} | | | |")
            continue
        rss = row["rss_peak_growth_mb"]
        out.append(
            f"| {row['library']} | {row['what']} | {row['seconds']:.4f} | "
            f"{row['tracemalloc_peak_mb']:.2f} | {'' if rss is None else f'{rss:.1f}'} |"
        )
    out += [
        "",
        f"**Cost per position at {PLAN_SOURCES:,} sources** (the order of sources only, no "
        "samples loaded):",
        "",
        "| library | how | positions | us per position |",
        "| --- | --- | ---: | ---: |",
    ]
    for row in record["costs"]:
        if "skipped" in row:
            continue
        if "failed" in row:
            out.append(f"| {row['library']} | {row['how']} | failed: {row['failed']} | |")
            continue
        out.append(f"| {row['library']} | {row['how']} | {row['positions']:,} | {row['us']:.2f} |")
    out += [
        "",
        "**Resume** onto another num_workers, world size or set of weights (3 sources of "
        "400/300/200 at 0.5/0.3/0.2, read in order; new weights 0.2/0.3/0.5):",
        "",
        "| library | another num_workers | another world size | new weights at the checkpoint |",
        "| --- | --- | --- | --- |",
    ]
    for library, found in record["resume"].items():
        if "skipped" in found:
            continue
        if "failed" in found:
            out.append(f"| {library} | failed: {found['failed']} | | |")
            continue
        out.append(
            f"| {library} | {found['num_workers']} | {found['world size']} | {found['weights']} |"
        )
    rates = {name: median(values) for name, values in record["halves"].items()}
    out += [
        "",
        f"**Two ImageFolder halves** as a Mixture against the whole ImageFolder: imagenet-train, "
        f"num_workers=2, batch {BATCH}, epochs of 2,000, interleaved:",
        "",
        "| reader | samples/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, values in record["halves"].items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        out.append(f"| {name} | {rates[name]:,.0f} | {shown} |")
    ratio = rates["Mixture of two Subset halves"] / rates["ImageFolder"]
    out += ["", f"Mixture / ImageFolder: **{ratio:.2f}x** (target >= 0.95x)"]
    return "\n".join(out)


def section(quick: bool = False) -> str:
    if quick:
        return table(run(positions=10**5, runs=1, quick=True))
    return table(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=POSITIONS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10^5 positions, 1 run: a smoke test")
    parser.add_argument("--json")
    parser.add_argument("--plan-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plan_child:
        print(json.dumps(plan_child(args.plan_child)))
        return
    print(environment())
    if args.quick:
        record = run(positions=min(args.positions, 10**5), runs=1, quick=True)
    else:
        record = run(args.positions, args.runs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
