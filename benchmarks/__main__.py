"""Run every benchmark side by side with torch.utils.data and write benchmarks/RESULTS.md.

Run it where torch and torchvision both import (a separate environment: they are never
dependencies of flowloader), from the repository root:

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /tmp/tv/bin/pip install -e .
    /tmp/tv/bin/python -m benchmarks            # about 8 minutes on 2 cores
    /tmp/tv/bin/python -m benchmarks --quick    # a smoke run (not for the record)

Without torchvision, the suites that need it are skipped and say so.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import os
import subprocess
import sys
import time

from .common import environment

SUITES = {
    "transport": ("Transport: ready batches from workers to the loop (issue 3)", False),
    "first_batch": ("Time to first batch (issue 3)", False),
    "mnist": ("MNIST, the seed's example (issue 4)", True),
    "cifar": ("CIFAR-10 (issue 12)", True),
    "imagenet": ("ImageNet pipelines through ImageFolder (issues 5 and 8)", True),
    "imagenet_large": ("ImageNet pipelines on 2048x1536 photographs (issue 8)", True),
    "threads_vs_processes": ("Thread workers or worker processes? (issues 8 and 20)", False),
    "epochs": ("Epoch after epoch: persistent_workers False and True (issue 41)", False),
    "torch_datasets": ("Torch datasets through flowloader.DataLoader (issue 12)", True),
    "peers": (
        "ImageNet pipelines against torchvision v2, DALI, SPDL, Grain and torchdata.nodes "
        "(issues 14 and 19)",
        True,
    ),
    "peers_large": ("The same peers on 2048x1536 photos (issue 19)", True),
    "per_image": ("One image on one core: decode, resize, conversion (issue 19)", True),
    "shards": ("Training from tar shards, local and over HTTP (issue 15)", False),
    "shard_shuffle": ("How well ShardSampler shuffles (issue 15)", False),
    "mixtures": (
        "Weighted mixtures against torchdata.nodes, HF datasets and Grain (issue 26)",
        False,
    ),
    "permutation": ("The keyed permutation: orders, uniformity and cost (issue 37)", False),
    "tables": (
        "Parquet tables: in sequence, shuffled, block-shuffled, against HF datasets and Lance "
        "(issue 39)",
        False,
    ),
    "tables_scale": (
        "Tables at scale: opening 10^8 rows, worker memory over 20 epochs (issue 39)",
        False,
    ),
    "image_table": ("An image-text table through the ImageNet pipeline (issue 39)", False),
    "make_tokens_text": ("make-tokens from text against datasets.map (issue 39)", False),
    "packing": (
        "Token packing against Grain, nanoGPT windows and token-file indexes (issue 27)",
        False,
    ),
    "worker_memory": ("Worker memory with two million file paths (issue 4)", False),
    "kept_labels": ("A loop that keeps every batch's labels (issue 38)", False),
    "stats_overhead": ("Cost of the always-on statistics (issue 5)", False),
    "checkpoint_cost": ("Cost of DataLoader.state_dict() (issue 6)", False),
    "soak": ("Soak: 500 epochs, does anything grow? (issue 13)", False),
}

NOTES = {
    "transport": (
        "Each batch is written once, by `default_collate` straight into a shared-memory segment "
        "that the worker reuses, and handed to the loop as NumPy views; torch stacks every batch "
        "into freshly allocated shared memory. Short epochs pay a warm-up while each worker "
        "creates its 4-5 segments (about 30 ms each for 38.5 MB)."
    ),
    "mnist": (
        "`MNIST.__getitems__` gathers a batch with one indexing operation and runs a "
        "batch-capable `Compose` once over it (ToTensor + Normalize as three in-place float32 "
        "passes written straight into shared memory; bit-identical to the per-sample path). "
        "With workers the batches are so cheap (~60 us) that per-batch handling decides; "
        'thread workers (`worker_method="thread"`) hand each batch over as it is, and run '
        "somewhat faster than worker processes here."
    ),
    "imagenet": (
        "flowloader's ImageFolder runs both pipelines through the native JPEG kernel (region "
        "decode with libjpeg-turbo, Pillow's resampling bit for bit, flips and conversion into "
        "the batch slot): on these 500x375 files its samples are bit-identical to "
        "torchvision's. torch + torchvision decode the whole file with Pillow, resize with "
        "Pillow and convert with torch."
    ),
    "peers": (
        "The peers run torchvision's own sample function on their engines, so they do the same "
        "work as torch's DataLoader; flowloader runs its planned batch path with the native "
        "kernel. Timed from building the loader, because grain's `mp_prefetch` computes most "
        "of the 2,000-image epoch before it hands out the first batch. DALI's CPU pipeline "
        "runs 2 threads in the main process; its batches are copied out to NumPy, as its "
        "framework iterators copy them into tensors. simplejpeg was tried as the JPEG decoder "
        "and left out: inside the pipeline it measured slower than Pillow here (4.5 against "
        "3.6 ms per training sample, 4.1 against 3.6 per validation sample)."
    ),
    "peers_large": (
        "Entropy decoding runs through every row above a crop's last one, whatever the scale: "
        "on these 1.2 MB photos that is most of the ~13 ms a sample costs flowloader on one "
        "core (`per_image --large`), and the same for every peer."
    ),
    "per_image": (
        "Each stage is a difference of totals; on the 2048x1536 photos these swing by 1-2 ms "
        "between passes, so a stage there can come out below zero: read the totals. "
        "flowloader's decode is about 0.6 ms of entropy decoding (the whole scan up to the "
        "crop's last row, at any scale) plus the region's IDCT and colour conversion; its "
        "resize is Pillow's filter with AVX2, and its conversion is written while the last "
        "resampling pass runs, so it costs next to nothing."
    ),
    "imagenet_large": (
        "The native kernel decodes each crop's region at 1/2 or 1/4 scale (at least 1.5 "
        "decoded pixels per output pixel) and stops after the crop's last row; entropy "
        "decoding still runs through every row above it, which is most of the cost on these "
        "1.2 MB photos. torch + torchvision decode every file whole at full scale."
    ),
    "threads_vs_processes": (
        "Threads use less CPU per sample (no transport, no second copy of the process) and a "
        "smaller tree. They keep up with processes where loading releases the GIL (the native "
        "JPEG kernel, NumPy) and trail where per-sample Python work takes turns on the GIL "
        "(the training pipeline's crop draw, torchvision's PIL transforms). Each thread worker "
        "builds its batches in reused blocks instead of fresh memory."
    ),
    "mixtures": (
        "flowloader's order is arithmetic (a Huffman tree of Beatty splits: any position is "
        "computed directly, every prefix within 2 of n·w). torchdata.nodes and HF datasets draw "
        "each position at random (in blocks of 1,000), so their counts wander as sqrt(n). "
        "Grain's interleave is exact for integer proportions that it rounds the weights to (the "
        "smallest scaled to 100, the others truncated), so it drifts by n times that rounding "
        "(about 2e-5 of n for these weights), and it computes each position with a Python loop "
        "over the sources. HF's map-style interleave stores one row index per position, so it "
        "is built at 10^6 positions. torchdata.nodes has no split by rank of its own: its world "
        "size trial splits each source by index modulo the world size. Resuming onto another "
        "worker count means torchdata's ParallelMapper, torchdata's StatefulDataLoader (for HF) "
        "and Grain's mp_prefetch."
    ),
    "permutation": (
        "Each pass of a shuffled source is a keyed permutation (flowloader/permutation.py): "
        "six unbalanced Feistel rounds with SplitMix64 round functions, cycle-walked to the "
        "source's size, and sources of up to 32 samples ranked by keyed hashes; a native "
        "kernel computes it, the NumPy path gives the same values where the kernel is not "
        "built. The Mixture rows locate positions through the mixture's tree as well: the "
        "permutation is a small part of their cost."
    ),
    "packing": (
        "flowloader plans a block of documents (4,096 by default) from their lengths alone, "
        "with vectorised cuts and a bisect-based best fit, then reads each row as slices of "
        "the memory map (a batch of rows reads its documents in one call); Grain packs each "
        "document into one of 64 open bins as it streams "
        "past, and hands them all out when one does not fit, so its padding is what 64 bins "
        "leave open at every flush. Building a `Packed` plans every block once to count its "
        "rows, which is most of flowloader's time to first row, and grows with the corpus "
        "(Grain streams: its first row comes at once). Grain's default read options prefetch "
        "with 16 threads, which on one core cost it about 5x; the one-core table gives it "
        "`ReadOptions(num_threads=0)`. Batches of nanoGPT windows cost about 0.15 ms, so with "
        "worker processes the hand-over of each batch, not the reading, sets the pace. The "
        "cold figures of the index depend on this machine's shared disk: over seven first "
        "opens of the 2 GB file with its pages dropped, the scan ran at 325-1,450 MB/s, and "
        "plain reads at 420-1,340 MB/s; from the page cache it scans at 2.8-3.7 GB/s."
    ),
    "worker_memory": (
        "A Python list is copied page by page into every worker as reference counts are "
        "written (pytorch#13246); DatasetFolder's NumPy table has no per-sample objects and "
        "stays shared. Each row runs in a fresh process."
    ),
    "stats_overhead": (
        "MNIST is the worst case (batches of ~55 us). These epochs last 50-250 ms, and single "
        "harness runs of them swing by several percent either way (seen: -1.9% to +7.3% for the "
        "same case); medians over 15-21 interleaved runs lie around +1% to +2.5%. The direct "
        "costs, measured alone: 0.43 us per sample where a dataset marks its transform, and a "
        "few perf_counter calls per batch. Image pipelines spend milliseconds per batch, where "
        "this is far below 1%."
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs: a smoke test")
    parser.add_argument("--only", help="comma-separated suites: " + ", ".join(SUITES))
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "RESULTS.md"))
    parser.add_argument("--section", help=argparse.SUPPRESS)  # one suite's body, to stdout
    args = parser.parse_args()
    if args.section:
        print(importlib.import_module(f"benchmarks.{args.section}").section(quick=args.quick))
        return
    chosen = args.only.split(",") if args.only else list(SUITES)
    has_torchvision = importlib.util.find_spec("torchvision") is not None
    env = environment()
    sections = existing_sections(args.output) if args.only else {}
    header = [
        "# Benchmark results",
        "",
        "Written by `python -m benchmarks` (see `benchmarks/__main__.py` for the set-up). Every "
        "table compares flowloader with `torch.utils.data.DataLoader` in one run: same data, "
        "same pipeline, same `num_workers`, fork, interleaved runs, medians. Absolute numbers "
        "drift on shared machines; compare the ratios.",
        "",
        f"Measured {datetime.date.today().isoformat()} on {env['cpus']} cores ({env['machine']}), "
        f"Python {env['python']}, NumPy {env['numpy']}, torch {env['torch']}"
        + (" with torchvision" if has_torchvision else "")
        + (" — quick run, not for the record." if args.quick else ".")
        + (f" Updated: {', '.join(chosen)}." if args.only else ""),
    ]
    for name in chosen:
        title, needs_torchvision = SUITES[name]
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"== {name}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        if needs_torchvision and not has_torchvision:
            body = "Skipped: torchvision is not importable here."
        else:
            body = run_alone(name, args.quick)
        paragraphs = [p.strip() for p in (module.__doc__ or "").strip().split("\n\n")]
        command = next((p for p in paragraphs if p.startswith("python -m")), "")
        description = " ".join(" ".join(p.split()) for p in paragraphs if p != command)
        section = [f"## {title}", "", description, "", f"`{command}`", "", body]
        if name in NOTES:
            section += ["", NOTES[name]]
        sections[title] = "\n".join(section)
        print(f"   {time.perf_counter() - started:.0f} s", file=sys.stderr)
    ordered = [sections[title] for title, _ in SUITES.values() if title in sections]
    with open(args.output, "w") as out:
        out.write("\n\n".join(["\n".join(header), *ordered]).rstrip() + "\n")
    print(f"wrote {args.output}", file=sys.stderr)


def run_alone(name: str, quick: bool) -> str:
    """A suite in a fresh process: thread pools left spinning by one suite's torch runs must
    not take CPU from the next suite's measurements."""
    command = [sys.executable, "-m", "benchmarks", "--section", name] + (
        ["--quick"] if quick else []
    )
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def existing_sections(path: str) -> dict[str, str]:
    """The "## title" sections of an earlier RESULTS.md, so --only updates just its own."""
    if not os.path.exists(path):
        return {}
    with open(path) as stream:
        chunks = stream.read().split("\n## ")[1:]
    return {chunk.split("\n", 1)[0]: "## " + chunk.rstrip() for chunk in chunks}


if __name__ == "__main__":
    main()
