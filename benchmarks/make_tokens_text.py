"""Tokenizing a text table into a token file (issue 39): `flowloader make-tokens --tokenizer`
against Hugging Face `datasets`' `map(batched=True, num_proc=2)` with the same tokenizer
file, on the same Parquet corpus, 2 processes each. Each run is a fresh process, timed from
its start to its end (imports, reading, tokenizing and writing), with its peak memory (the
largest resident set of the run's processes). flowloader's peak is also taken on a corpus
twice as long, to show that memory does not grow with the input.

    python -m benchmarks.make_tokens_text [--documents 60000] [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

import numpy as np

from .common import alternate, environment, median, write_json

WORKERS = 2
ROW_GROUP = 2000


def write_corpus(folder: str, documents: int) -> str:
    """A Parquet file of ``documents`` texts of 50-400 words drawn from a Zipf vocabulary
    of made-up words, and a byte-level BPE tokenizer (8,000 tokens) trained on its start."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = np.random.default_rng(0)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    vocabulary = ["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(20_000)]
    ranks = np.minimum(rng.zipf(1.2, size=documents * 400), len(vocabulary)) - 1
    texts, used = [], 0
    for length in rng.integers(50, 400, documents):
        texts.append(" ".join(vocabulary[r] for r in ranks[used : used + length]) + ".")
        used += length
    path = os.path.join(folder, f"corpus-{documents}.parquet")
    pq.write_table(
        pa.table({"id": np.arange(documents), "text": texts}), path, row_group_size=ROW_GROUP
    )
    tokenizer_path = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(tokenizer_path):
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"])
        tokenizer.train_from_iterator(texts[:5000], trainer)
        tokenizer.save(tokenizer_path)
    return path


FLOWLOADER = """
import sys
from flowloader.cli.main import main
sys.exit(main(["make-tokens", {corpus!r}, {output!r}, "--tokenizer", {tokenizer!r},
               "--eos", "<|endoftext|>", "--workers", "{workers}", "--force"]))
"""

DATASETS = """
import datasets
from tokenizers import Tokenizer
datasets.disable_progress_bars()
tokenizer = Tokenizer.from_file({tokenizer!r})
eos = tokenizer.token_to_id("<|endoftext|>")

def tokenize(batch):
    return {{"input_ids": [e.ids + [eos] for e in tokenizer.encode_batch(batch["text"])]}}

table = datasets.Dataset.from_parquet({corpus!r}, cache_dir={cache!r})
table.map(tokenize, batched=True, num_proc={workers}, remove_columns=["id", "text"],
          cache_file_name={output!r}, load_from_cache_file=False)
"""


def timed(script: str) -> tuple[float, int]:
    """Seconds and peak resident bytes of ``script`` run in a fresh interpreter (its pool's
    processes included: the peak is the largest of them)."""
    code = textwrap.dedent(script)
    probe = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "command = [sys.executable, '-c', sys.argv[1]]\n"
        "done = subprocess.run(command, capture_output=True, text=True)\n"
        "assert done.returncode == 0, done.stderr[-2000:]\n"
        "seconds = time.perf_counter() - start\n"
        "print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, code], capture_output=True, text=True, check=True
    )
    seconds, peak = out.stdout.split()
    return float(seconds), int(peak)


def run(documents: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        corpus = write_corpus(folder, documents)
        longer = write_corpus(folder, 2 * documents)
        tokenizer = os.path.join(folder, "tokenizer.json")
        peaks: dict[str, list[int]] = {}

        def measure(name: str, script: str, **values: Any) -> float:
            # Nothing cached from the last run: datasets converts the Parquet file each time.
            shutil.rmtree(os.path.join(folder, "hf-cache"), ignore_errors=True)
            seconds, peak = timed(script.format(tokenizer=tokenizer, workers=WORKERS, **values))
            peaks.setdefault(name, []).append(peak)
            return documents / seconds

        flowloader_out = os.path.join(folder, "tokens.bin")
        rates = alternate(
            runs,
            {
                "flowloader make-tokens": lambda: measure(
                    "flowloader make-tokens", FLOWLOADER, corpus=corpus, output=flowloader_out
                ),
                "datasets map(num_proc=2)": lambda: measure(
                    "datasets map(num_proc=2)",
                    DATASETS,
                    corpus=corpus,
                    output=os.path.join(folder, "mapped.arrow"),
                    cache=os.path.join(folder, "hf-cache"),
                ),
            },
        )
        _, twice = timed(
            FLOWLOADER.format(
                corpus=longer, output=flowloader_out, tokenizer=tokenizer, workers=WORKERS
            )
        )
        return {
            "documents": documents,
            "corpus_mb": os.path.getsize(corpus) / 1e6,
            "rates": rates,
            "peak_mb": {name: median(p) / 1e6 for name, p in peaks.items()},
            "flowloader_peak_mb_twice_the_documents": twice / 1e6,
        }


def table(record: dict[str, Any]) -> str:
    lines = [
        f"{record['documents']:,} documents ({record['corpus_mb']:.0f} MB Parquet), a byte-level "
        f"BPE tokenizer of 8,000 tokens, {WORKERS} processes; documents/s from process start to "
        "end, medians of interleaved runs.",
        "",
        "| tool | documents/s | runs | peak RSS |",
        "| --- | ---: | --- | ---: |",
    ]
    for name, rates in record["rates"].items():
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        peak = record["peak_mb"][name]
        lines.append(f"| {name} | {median(rates):,.0f} | {shown} | {peak:,.0f} MB |")
    names = list(record["rates"])
    ratio = median(record["rates"][names[0]]) / median(record["rates"][names[1]])
    lines += [
        "",
        f"flowloader / datasets: {ratio:.2f}x. flowloader's peak RSS on twice the documents: "
        f"{record['flowloader_peak_mb_twice_the_documents']:,.0f} MB.",
    ]
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(10_000 if quick else 60_000, 1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=60_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.documents, args.runs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
