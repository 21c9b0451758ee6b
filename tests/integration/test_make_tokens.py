"""`flowloader make-tokens`: JSONL and text input, one-line errors naming the file and line,
the read-back line, and a resume after a real interruption that ends byte-identical."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from flowloader.cli.make_tokens import is_jsonl
from flowloader.text import TokenDataset, write_tokens

from .test_cli import PROGRESS_LINE, flowloader

DOCUMENTS = [[1, 2, 3], [], [65535, 0], [7] * 10]
# Enough documents that write_tokens records its progress many times before it ends.
BIG = 100_000


def written(path) -> list[list[int]]:
    ds = TokenDataset(str(path))
    return [ds[i].tolist() for i in range(len(ds))]


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    return lines[-1]


def test_jsonl_lists_with_blank_lines(tmp_path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d) for d in DOCUMENTS) + "\n\n  \n")
    done = flowloader("make-tokens", str(source), str(tmp_path / "out" / "train.bin"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"4 documents, 15 uint16 tokens in {tmp_path / 'out' / 'train.bin'}"
    )
    assert PROGRESS_LINE.match(done.stderr.strip()), done.stderr
    assert f"{os.path.getsize(source):,}/{os.path.getsize(source):,} bytes" in done.stderr
    assert written(tmp_path / "out" / "train.bin") == DOCUMENTS


def test_jsonl_objects_with_field(tmp_path) -> None:
    source = tmp_path / "docs.json"  # .json is read as JSON Lines too
    lines = [{"ids": d, "text": "..."} for d in DOCUMENTS]
    source.write_text("\n".join(json.dumps(line) for line in lines))
    done = flowloader("make-tokens", str(source), str(tmp_path / "t.bin"), "--field", "ids")
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "t.bin") == DOCUMENTS
    default = flowloader("make-tokens", str(source), str(tmp_path / "u.bin"))
    assert "docs.json:1: the object has no 'tokens' field (see --field)" in one_line_error(default)


def test_text_lines(tmp_path) -> None:
    source = tmp_path / "docs.txt"
    source.write_bytes(b"1 2 3\r\n\n65535\t0\n 7  7 7 7 7 7 7 7 7 7 \n")
    done = flowloader("make-tokens", str(source), str(tmp_path / "t.bin"))
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "t.bin") == [[1, 2, 3], [65535, 0], [7] * 10]


def test_uint32_and_vocab_size(tmp_path) -> None:
    source = tmp_path / "docs.tokens"  # any extension but .jsonl / .json is text
    source.write_text("100000 5\n99999\n")
    args = (str(source), str(tmp_path / "t.bin"), "--dtype", "uint32", "--vocab-size", "100001")
    done = flowloader("make-tokens", *args)
    assert done.returncode == 0, done.stderr
    assert "2 documents, 3 uint32 tokens" in done.stdout
    assert TokenDataset(str(tmp_path / "t.bin"))[0].dtype == np.uint32
    assert written(tmp_path / "t.bin") == [[100000, 5], [99999]]


@pytest.mark.parametrize(
    ("name", "content", "options", "message"),
    [
        ("d.jsonl", "[1]\n\n[1, 2.5]\n", [], "d.jsonl:3: expected a list of integer token ids"),
        ("d.jsonl", "[1]\n[[1, 2]]\n", [], "d.jsonl:2: expected a list of integer token ids"),
        ("d.jsonl", '"1 2"\n', [], "d.jsonl:1: expected a list of integer token ids"),
        ("d.jsonl", "[1, 2\n", [], "d.jsonl:1: not JSON: '[1, 2'"),
        ("d.jsonl", "[1]\n[-1]\n", [], "d.jsonl:2: token id -1 is outside uint16 (0..65535)"),
        ("d.jsonl", "[65536]\n", [], "d.jsonl:1: token id 65536 is outside uint16"),
        (
            "d.json",
            '{"tokens": [5]}',
            ["--vocab-size", "5"],
            "token id 5 is outside --vocab-size 5",
        ),
        ("d.txt", "1 2\n3 x 4\n", [], "d.txt:2: expected whitespace-separated integer token ids"),
        ("d.txt", "1.5\n", [], "d.txt:1: expected whitespace-separated integer token ids"),
        ("d.txt", "9" * 30, ["--dtype", "uint32"], "d.txt:1: expected whitespace-separated"),
        ("d.txt", "4294967296\n", ["--dtype", "uint32"], "outside uint32 (0..4294967295)"),
        ("d.txt", "\n \n", [], "d.txt: no documents (the file is empty or only blank lines)"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(
    tmp_path, name, content, options, message
) -> None:
    (tmp_path / name).write_text(content)
    done = flowloader("make-tokens", name, "t.bin", *options, cwd=str(tmp_path))
    assert message in one_line_error(done)
    assert not os.path.exists(tmp_path / "t.bin")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such.jsonl", "t.bin"], "/no/such.jsonl: no such file"),
        ([".", "t.bin"], ".: a folder without Parquet or Arrow files"),
        (["d.txt", "."], ".: is a directory; OUTPUT is the token file to write"),
        (["d.txt", "d.txt"], "OUTPUT is INPUT itself"),
        (["d.txt", "t.bin", "--vocab-size", "70000"], "does not fit uint16 ids (< 65536)"),
        (["d.txt", "t.bin", "--vocab-size", "0"], "positive"),
        (["d.txt", "t.bin", "--dtype", "int32"], "invalid choice"),
        (["d.txt"], "the following arguments are required: OUTPUT"),
    ],
)
def test_bad_arguments_and_paths(tmp_path, args, message) -> None:
    (tmp_path / "d.txt").write_text("1 2\n")
    done = flowloader("make-tokens", *args, cwd=str(tmp_path))
    assert done.stderr.count("\n") == 1, done.stderr
    assert message in one_line_error(done)


def test_help_names_the_formats() -> None:
    assert "make-tokens" in flowloader("--help").stdout
    said = " ".join(flowloader("make-tokens", "--help").stdout.split())
    assert ".jsonl or .json file as JSON Lines" in said
    assert "any other file as text" in said
    assert "a Parquet or Arrow table" in said
    assert "With --tokenizer the documents are texts" in said


def test_the_format_follows_the_extension() -> None:
    assert [is_jsonl(p) for p in ("a.jsonl", "a.JSON", "dir.txt/a.jsonl")] == [True] * 3
    assert [is_jsonl(p) for p in ("a.txt", "a.jsonl.gz", "jsonl")] == [False] * 3


def test_the_printed_line_reads_it_back(tmp_path) -> None:
    """As a user would: write the tokens, then run the line the command printed."""
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in DOCUMENTS))
    done = flowloader("make-tokens", "docs.jsonl", "TOKENS.bin", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[-1]
    assert line == "read it with: flowloader.text.TokenDataset('TOKENS.bin')"
    script = (
        "import flowloader, flowloader.text\n"
        f"ds = {line.removeprefix('read it with: ')}\n"
        "print([ds[i].tolist() for i in range(len(ds))])"
    )
    read = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == DOCUMENTS


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """(a JSONL file of BIG documents, the token file an uninterrupted run writes from it)."""
    folder = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(0)
    with open(folder / "big.jsonl", "w") as out:
        for length in rng.integers(1, 64, BIG):
            out.write(json.dumps(rng.integers(0, 50_000, length).tolist()) + "\n")
    done = flowloader("make-tokens", str(folder / "big.jsonl"), str(folder / "whole.bin"))
    assert done.returncode == 0, done.stderr
    return folder / "big.jsonl", folder / "whole.bin"


def interrupt(source, output, signum: int) -> subprocess.CompletedProcess:
    """Run make-tokens and send ``signum`` once write_tokens has recorded some progress
    (its ``<output>.partial.json``), as a crash or a Ctrl-C would land mid-run."""
    command = [sys.executable, "-m", "flowloader", "make-tokens", str(source), str(output)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{output}.partial.json") and process.poll() is None:
        assert time.monotonic() < deadline, "make-tokens recorded no progress in 60 s"
        time.sleep(0.002)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_an_interrupted_run_resumes_to_the_same_bytes(big_input, tmp_path, signum) -> None:
    source, whole = big_input
    output = tmp_path / "resumed.bin"
    stopped = interrupt(source, output, signum)
    if signum == signal.SIGINT:
        assert stopped.returncode == 130
        assert stopped.stderr.splitlines()[-1] == "interrupted: rerun the same command to continue"
    else:
        assert stopped.returncode == -signal.SIGKILL
    assert not output.exists(), "the run ended before the signal: make the input bigger"
    kept = json.loads((tmp_path / "resumed.bin.partial.json").read_text())["documents"]
    assert 0 < kept < BIG
    done = flowloader("make-tokens", str(source), str(output))
    assert done.returncode == 0, done.stderr
    assert f"(the first {kept} kept from an interrupted run)" in done.stdout
    assert f"{BIG:,} documents" in done.stderr  # the progress counts the kept ones too
    for suffix in ("", ".idx.npy"):
        assert (tmp_path / f"resumed.bin{suffix}").read_bytes() == (
            whole.parent / f"whole.bin{suffix}"
        ).read_bytes(), suffix
    metas = [
        json.loads((d / f"{n}.bin.idx.json").read_text())
        for d, n in ((tmp_path, "resumed"), (whole.parent, "whole"))
    ]
    for meta in metas:
        del meta["file_mtime_ns"]  # when each file was written: their only difference
    assert metas[0] == metas[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "resumed.bin",
        "resumed.bin.idx.json",
        "resumed.bin.idx.npy",
    ]


SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a lazy dog sleeps in the sun",
    "the fox and the dog are friends",
    "tokens are written once and read many times",
]


def test_the_readme_tokenizers_example(tmp_path) -> None:
    """The README's Hugging Face `tokenizers` example, both ways: token lists to JSONL then
    make-tokens, and write_tokens from a generator. The tokenizer is trained here, in memory."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]", "<eos>"])
    tokenizer.train_from_iterator(SENTENCES, trainer)
    eos = tokenizer.token_to_id("<eos>")
    (tmp_path / "corpus.txt").write_text("\n".join(SENTENCES) + "\n")

    def documents(path):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                yield [*tokenizer.encode(line.strip()).ids, eos]

    with open(tmp_path / "corpus.jsonl", "w", encoding="utf-8") as out:
        for ids in documents(tmp_path / "corpus.txt"):
            out.write(json.dumps(ids) + "\n")
    vocab = str(tokenizer.get_vocab_size())
    done = flowloader("make-tokens", "corpus.jsonl", "cli.bin", "--vocab-size", vocab, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    write_tokens(
        documents(tmp_path / "corpus.txt"),
        tmp_path / "direct.bin",
        vocab_size=tokenizer.get_vocab_size(),
    )
    for name in ("cli.bin", "direct.bin"):
        ds = TokenDataset(str(tmp_path / name))
        assert [tokenizer.decode(ds[i].tolist()) for i in range(len(ds))] == SENTENCES
        assert [int(ds[i][-1]) for i in range(len(ds))] == [eos] * len(SENTENCES)
    assert (tmp_path / "cli.bin").read_bytes() == (tmp_path / "direct.bin").read_bytes()


def test_a_finished_output_is_replaced_only_with_force(tmp_path) -> None:
    (tmp_path / "d.txt").write_text("1 2\n3\n")
    assert flowloader("make-tokens", "d.txt", "t.bin", cwd=str(tmp_path)).returncode == 0
    (tmp_path / "e.txt").write_text("7 7 7\n")
    refused = flowloader("make-tokens", "e.txt", "t.bin", cwd=str(tmp_path))
    assert "t.bin is already a finished token file: pass --force" in one_line_error(refused)
    assert written(tmp_path / "t.bin") == [[1, 2], [3]]
    done = flowloader("make-tokens", "e.txt", "t.bin", "--force", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert written(tmp_path / "t.bin") == [[7, 7, 7]]
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_tokens([[1]], tmp_path / "t.bin")
    write_tokens([[1]], tmp_path / "t.bin", overwrite=True)
    assert written(tmp_path / "t.bin") == [[1]]


def test_a_failed_run_says_what_it_keeps_and_how_to_start_over(tmp_path) -> None:
    good = "".join(f"{n} {n + 1}\n" for n in range(5000))
    (tmp_path / "d.txt").write_text(good + "1 x\n")
    failed = flowloader("make-tokens", "d.txt", "t.bin", cwd=str(tmp_path))
    line = one_line_error(failed)
    assert "d.txt:5001: expected whitespace-separated integer token ids" in line
    assert "kept in t.bin.partial* for a rerun of the same command" in line
    assert "delete t.bin.partial* to start over" in line
    (tmp_path / "d.txt").write_text(good + "1 2\n")
    done = flowloader("make-tokens", "d.txt", "t.bin", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "kept from an interrupted run" in done.stdout
    assert len(written(tmp_path / "t.bin")) == 5001
