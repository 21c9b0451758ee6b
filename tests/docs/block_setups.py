"""What a page's block about the user's own files needs made first: a tokenizer and a corpus,
shards on a local S3 server, two small videos. Each block that needs one names it by a phrase
of its code (``SETUPS``)."""

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

from ..readme_blocks import Block
from ..shard_server import local_s3_server

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


def setup_of(block: Block) -> Setup | None:
    """The setup the block's code names by its phrase, if any (at most one)."""
    found = [setup for phrase, setup in SETUPS.items() if phrase in block.code]
    assert len(found) <= 1, f"{block.name} matches more than one setup"
    return found[0] if found else None
