"""`flowloader make-tokens --tokenizer`: texts from Parquet, Arrow, a save_to_disk folder,
JSON Lines and text lines, tokenized with a tokenizers file into the same bytes for any
--workers; token-id list columns of tables; errors naming the file, row and column; a run
killed mid-way resumes to the same bytes and leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from flowloader.text import TokenDataset

from .test_cli import PROGRESS_LINE, flowloader
from .test_make_tokens import one_line_error, written

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "sun", "moon"]


def texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(1, 40))) for _ in range(count)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder with a BPE tokenizer.json and one corpus in five formats."""
    from tokenizers import models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("text")
    documents = texts(5000)
    tokenizer = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["[UNK]", "<eos>"])
    tokenizer.train_from_iterator(documents[:500], trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    table = pa.table({"n": np.arange(len(documents)), "text": documents})
    pq.write_table(table, folder / "corpus.parquet", row_group_size=700)
    with (
        pa.OSFile(str(folder / "corpus.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, table.schema) as writer,
    ):
        writer.write_table(table, max_chunksize=900)
    saved = folder / "saved"  # save_to_disk's layout: stream-format shards and state.json
    saved.mkdir()
    for k, part in enumerate((table.slice(0, 3000), table.slice(3000))):
        with (
            pa.OSFile(str(saved / f"data-0000{k}-of-00002.arrow"), "wb") as sink,
            pa.ipc.new_stream(sink, table.schema) as writer,
        ):
            writer.write_table(part, max_chunksize=1000)
    names = [{"filename": f"data-0000{k}-of-00002.arrow"} for k in range(2)]
    (saved / "state.json").write_text(json.dumps({"_data_files": names}))
    with open(folder / "corpus.jsonl", "w") as out:
        for n, text in enumerate(documents):
            out.write(json.dumps({"n": n, "text": text}) + "\n")
    (folder / "corpus.txt").write_text("\n".join(documents) + "\n")
    return folder, documents, tokenizer


def tokenize(folder, source: str, output: str, *options: str) -> subprocess.CompletedProcess:
    return flowloader(
        "make-tokens", source, output, "--tokenizer", "tokenizer.json", *options, cwd=str(folder)
    )


@pytest.mark.slow  # every format at 0-2 workers (about 10 s): once, in CI's slow stage
def test_every_format_and_worker_count_writes_the_same_bytes(corpus) -> None:
    folder, documents, tokenizer = corpus
    eos = tokenizer.token_to_id("<eos>")
    runs = [
        ("corpus.parquet", "1"),
        ("corpus.parquet", "2"),
        ("corpus.parquet", "3"),
        ("corpus.arrow", "2"),
        ("saved", "2"),
        ("corpus.jsonl", "2"),
        ("corpus.txt", "1"),
    ]
    outputs = []
    for k, (source, workers) in enumerate(runs):
        done = tokenize(folder, source, f"out{k}.bin", "--eos", "<eos>", "--workers", workers)
        assert done.returncode == 0, done.stderr
        assert f"{len(documents)} documents" in done.stdout
        assert PROGRESS_LINE.match(done.stderr.splitlines()[-1]), done.stderr
        unit = "bytes" if source.endswith((".jsonl", ".txt")) else "rows"
        assert f" {unit}, {len(documents):,} documents" in done.stderr
        outputs.append((folder / f"out{k}.bin").read_bytes())
    assert all(out == outputs[0] for out in outputs), "the bytes differ between runs"
    expected = [[*encoding.ids, eos] for encoding in tokenizer.encode_batch(documents)]
    assert written(folder / "out0.bin") == expected


def test_a_table_column_of_token_ids_without_a_tokenizer(tmp_path) -> None:
    lists = [[1, 2, 3], [], [65535, 0], [7] * 10] * 300
    table = pa.table({"input_ids": pa.array(lists, pa.list_(pa.int32())), "x": range(1200)})
    pq.write_table(table, tmp_path / "ids.parquet", row_group_size=250)
    done = flowloader(
        "make-tokens", "ids.parquet", "t.bin", "--column", "input_ids", cwd=str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "t.bin") == lists
    bad = pa.table({"input_ids": pa.array([[1], [2], None, [4]], pa.list_(pa.int64()))})
    pq.write_table(bad, tmp_path / "nulls.parquet")
    done = flowloader(
        "make-tokens", "nulls.parquet", "n.bin", "--column", "input_ids", cwd=str(tmp_path)
    )
    assert one_line_error(done).endswith("nulls.parquet: row 2: 'input_ids' is null")
    big = pa.table({"tokens": pa.array([[1], [2], [3, 70000]], pa.list_(pa.int64()))})
    pq.write_table(big, tmp_path / "big.parquet", row_group_size=2)
    done = flowloader("make-tokens", "big.parquet", "b.bin", cwd=str(tmp_path))
    assert "big.parquet: row 2: token id 70000 is outside uint16" in one_line_error(done)
    assert not (tmp_path / "b.bin").exists()


def test_bad_input_names_the_file_row_and_column(corpus, tmp_path) -> None:
    folder, _, _ = corpus
    (tmp_path / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())
    pq.write_table(pa.table({"text": ["a fox", None, "a dog"]}), tmp_path / "nulls.parquet")
    (tmp_path / "numbers.jsonl").write_text('{"text": "a fox"}\n{"text": 7}\n')
    (tmp_path / "no-field.jsonl").write_text('{"body": "a fox"}\n')
    (tmp_path / "bad.json").write_text("{not a tokenizer")
    (tmp_path / "empty").mkdir()
    vocab = {f"w{i}": i for i in range(70_000)}
    wide = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="w0"))
    wide.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    wide.save(str(tmp_path / "wide.json"))
    (tmp_path / "t.txt").write_text("w1 w2\n")
    cases = [
        (["nulls.parquet", "o.bin"], "nulls.parquet: row 1: 'text' is null"),
        (["numbers.jsonl", "o.bin"], "numbers.jsonl:2: 'text' is int, not text"),
        (["no-field.jsonl", "o.bin"], "no-field.jsonl:1: expected an object with a 'text' text"),
        (
            ["nulls.parquet", "o.bin", "--column", "body"],
            "no column ['body']; the table's columns are ['text']",
        ),
        (["empty", "o.bin"], "empty: a folder without Parquet or Arrow files"),
        (["nulls.parquet", "o.bin", "--eos", "<end>"], "--eos '<end>': the tokenizer"),
    ]
    for args, message in cases:
        done = tokenize(tmp_path, *args)
        assert message in one_line_error(done), args
        assert not (tmp_path / "o.bin").exists()
    done = flowloader("make-tokens", "t.txt", "o.bin", "--tokenizer", "bad.json", cwd=str(tmp_path))
    assert "bad.json: not a tokenizers tokenizer file" in one_line_error(done)
    done = flowloader(
        "make-tokens", "t.txt", "o.bin", "--tokenizer", "wide.json", cwd=str(tmp_path)
    )
    assert "wide.json has 70,000 tokens, more than uint16 ids hold" in one_line_error(done)
    assert "--dtype uint32" in one_line_error(done)
    done = flowloader(
        "make-tokens",
        "t.txt",
        "o.bin",
        "--tokenizer",
        "wide.json",
        "--dtype",
        "uint32",
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "o.bin") == [[1, 2]]
    done = flowloader("make-tokens", "t.txt", "o.bin", "--eos", "x", cwd=str(tmp_path))
    assert "--eos appends a token of --tokenizer" in one_line_error(done)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.slow  # a parallel run killed and resumed (about 10 s): once, in CI's slow stage
def test_a_killed_parallel_run_resumes_to_the_same_bytes_and_leaves_no_worker(
    corpus, tmp_path
) -> None:
    folder, _, _ = corpus
    many = texts(60_000, seed=1)
    pq.write_table(pa.table({"text": many}), tmp_path / "many.parquet", row_group_size=2000)
    (tmp_path / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())
    whole = tokenize(tmp_path, "many.parquet", "whole.bin", "--workers", "2")
    assert whole.returncode == 0, whole.stderr
    output = tmp_path / "resumed.bin"
    command = [
        sys.executable,
        "-m",
        "flowloader",
        "make-tokens",
        "many.parquet",
        str(output),
        "--tokenizer",
        "tokenizer.json",
        "--workers",
        "2",
    ]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{output}.partial.json") and process.poll() is None:
        assert time.monotonic() < deadline, "make-tokens recorded no progress in 60 s"
        time.sleep(0.002)
    workers = children(process.pid)
    assert workers, "the run has no worker processes"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert not output.exists(), "the run ended before the kill: make the corpus bigger"
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in workers):
        assert time.monotonic() < deadline, f"workers {workers} outlived the killed run"
        time.sleep(0.05)
    done = tokenize(tmp_path, "many.parquet", str(output), "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "kept from an interrupted run" in done.stdout
    assert output.read_bytes() == (tmp_path / "whole.bin").read_bytes()
    assert len(TokenDataset(str(output))) == len(many)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_tokenized_table_packs_into_rows(corpus) -> None:
    """A table's texts, tokenized by make-tokens, through Packed and the loader: every token
    in exactly one row, the same rows for any workers."""
    import flowloader as fl
    from flowloader.text import Packed

    folder, _, _ = corpus
    done = tokenize(folder, "corpus.parquet", "packed.bin", "--eos", "<eos>", "--workers", "2")
    assert done.returncode == 0, done.stderr
    rows = Packed(TokenDataset(str(folder / "packed.bin")), seq_len=64, shuffle=True, seed=1)
    rows.audit()

    def epoch(**options) -> list:
        loader = fl.DataLoader(rows, batch_size=16, **options)
        return [batch["tokens"].tolist() for batch in loader]

    assert epoch(num_workers=2) == epoch()
