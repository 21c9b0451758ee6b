"""Every Python block of the README runs as pasted (tests/readme_blocks.py): alone, in a new
interpreter, in an empty folder, and prints what the README shows. Blocks about the user's
own files (a tokenizer, shards on S3) get those files made first; the Ray recipe runs
against the loopback cluster in tests/ray_cluster."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from PIL import Image

from flowloader.shards import write_shards

from ..readme_blocks import Block, python_blocks, run_block
from ..shard_server import local_s3_server

pytestmark = pytest.mark.timeout(300)

# Makes a block's files and services for the test's length; yields the block's environment.
Setup = Callable[[pathlib.Path], contextlib.AbstractContextManager[dict[str, str]]]


@contextlib.contextmanager
def tokenizer_files(folder: pathlib.Path) -> Iterator[dict[str, str]]:
    """The block's ``tokenizer.json`` (trained here on a few lines) and ``corpus.txt``."""
    tokenizers = pytest.importorskip("tokenizers")
    lines = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps"]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|endoftext|>"])
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    yield {}


@contextlib.contextmanager
def shards_on_s3(folder: pathlib.Path) -> Iterator[dict[str, str]]:
    """A bucket named ``bucket`` on a local S3 server (moto, loopback only) holding the
    block's 147 shards, one small JPEG each; the block reaches it through AWS_ENDPOINT_URL
    and the usual credential variables, as a user's S3 does."""
    with local_s3_server() as endpoint:
        bucket = urllib.request.Request(f"{endpoint}/bucket", method="PUT")
        urllib.request.urlopen(bucket, timeout=10).close()
        encoded = io.BytesIO()
        Image.fromarray(np.full((256, 256, 3), 90, np.uint8)).save(encoded, "JPEG")
        jpeg = encoded.getvalue()
        samples = ({"__key__": f"{i:06d}", "jpg": jpeg, "cls": b"3"} for i in range(147))
        for path in write_shards(samples, str(folder / "upload" / "train-%06d.tar"), max_count=1):
            with open(path, "rb") as shard:
                put = urllib.request.Request(
                    f"{endpoint}/bucket/{os.path.basename(path)}",
                    shard.read(),
                    {"Content-Type": "application/x-tar"},
                    method="PUT",
                )
            urllib.request.urlopen(put, timeout=10).close()
        yield {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }


@contextlib.contextmanager
def two_videos(folder: pathlib.Path) -> Iterator[dict[str, str]]:
    """The block's ``a.mp4`` (with an audio track) and ``b.mkv``: small H.264 videos made by
    PyAV."""
    pytest.importorskip("av", reason="needs PyAV (pip install 'flowloader[video]')")
    from ..unit.video import media

    media.encode(str(folder / "a.mp4"), audio=True)
    media.encode(str(folder / "b.mkv"), variable_rate=True)
    yield {}


# Which blocks need files or services made first: a phrase of the block -> what makes them.
SETUPS: dict[str, Setup] = {
    'Tokenizer.from_file("tokenizer.json")': tokenizer_files,
    "s3://bucket/": shards_on_s3,
    'VideoClips(["a.mp4", "b.mkv"]': two_videos,
}
IN_THE_RAY_STEP = 'worker_method="ray"'  # tests/ray_cluster/test_ray_placement.py runs it
NEEDS_TORCH = "import flowloader.utils.data"
NEEDS_PYARROW = "import pyarrow"


def setup_of(block: Block) -> Setup | None:
    found = [setup for phrase, setup in SETUPS.items() if phrase in block.code]
    assert len(found) <= 1, f"{block.name} matches more than one setup"
    return found[0] if found else None


def test_every_block_is_run_here_or_in_the_ray_step() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 8
    assert sum(IN_THE_RAY_STEP in block.code for block in blocks) == 1
    for phrase in SETUPS:
        assert sum(phrase in block.code for block in blocks) == 1, phrase


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.name)
def test_the_readme_block_runs_as_pasted(block: Block, tmp_path) -> None:
    if IN_THE_RAY_STEP in block.code:
        pytest.skip("runs against the loopback Ray cluster: tests/ray_cluster")
    if NEEDS_TORCH in block.code:
        pytest.importorskip("torch")
    if NEEDS_PYARROW in block.code:
        pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")
    setup = setup_of(block)
    with setup(tmp_path) if setup else contextlib.nullcontext({}) as env:
        run_block(block, tmp_path, env)
