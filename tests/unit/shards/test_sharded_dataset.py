"""ShardedDataset on local shards: indexing, the shard formats it reads, and clear errors."""

from __future__ import annotations

import os
import pickle
import subprocess
import tarfile

import numpy as np
import pytest

import flowloader as fl
from flowloader.shards import (
    ShardedDataset,
    ShardFormatError,
    expand_braces,
    shard_list,
    write_shards,
)
from flowloader.shards.tar_index import INDEX_SUFFIX

from .conftest import numbered_samples


def test_samples_read_back_in_order_with_key_and_url(shards) -> None:
    ds = ShardedDataset(shards)
    assert len(ds) == 35
    assert ds.shard_sizes() == [8, 8, 8, 8, 3]
    sample = ds[9]
    assert sample["__key__"] == "sample00009"
    assert sample["__url__"] == shards[1]
    assert (sample["txt"], sample["cls"], sample["bin"]) == (b"text 9", b"2", b"\x09" * 9)
    assert ds[-1]["__key__"] == "sample00034"
    with pytest.raises(IndexError, match="35"):
        ds[35]


def test_urls_as_a_brace_pattern_or_a_listing_file(shards, tmp_path) -> None:
    assert expand_braces("a-{08..10}-{x,y}.tar") == [
        "a-08-x.tar",
        "a-08-y.tar",
        "a-09-x.tar",
        "a-09-y.tar",
        "a-10-x.tar",
        "a-10-y.tar",
    ]
    pattern = str(tmp_path / "part-{000..004}.tar")
    assert ShardedDataset(pattern).urls == shards
    listing = tmp_path / "shards.txt"
    listing.write_text(
        "# training shards\n" + "\n".join(os.path.basename(s) for s in shards) + "\n"
    )
    assert ShardedDataset(str(listing)).urls == shards


def test_urls_as_the_folder_make_shards_leaves(shards, tmp_path) -> None:
    """A folder is its ``*.tar`` in sorted order (the sidecars and other files are not)."""
    (tmp_path / "notes.txt").write_text("not a shard")
    assert ShardedDataset(str(tmp_path)).urls == shards
    assert ShardedDataset(tmp_path).urls == shards  # a pathlib.Path too
    assert ShardedDataset(f"file://{tmp_path}").urls == shards


def test_urls_as_a_glob(shards, tmp_path) -> None:
    assert ShardedDataset(str(tmp_path / "*.tar")).urls == shards
    assert ShardedDataset(str(tmp_path / "part-00[13].tar")).urls == [shards[1], shards[3]]
    assert ShardedDataset(str(tmp_path / "part-00{1,3}.tar")).urls == [shards[1], shards[3]]
    assert len(ShardedDataset(str(tmp_path / "part-*.tar"))) == 35


def test_a_file_whose_name_looks_like_a_glob_is_itself(shards, tmp_path) -> None:
    odd = tmp_path / "odd[1].tar"
    os.replace(shards[1], odd)
    assert ShardedDataset(str(odd)).urls == [str(odd)]


def test_a_folder_without_shards_or_a_glob_matching_none_is_an_error_naming_it(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.jpg").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"no \.tar shards in the folder .*empty"):
        ShardedDataset(str(empty))
    with pytest.raises(FileNotFoundError, match=r"no shards match .*empty/\*\.tar"):
        ShardedDataset(str(empty / "*.tar"))


def test_http_urls_and_pipe_commands_are_never_globbed() -> None:
    query = "https://host/shard-0.tar?token=a[1]"
    assert shard_list(query) == [query]
    assert shard_list("pipe:cat shards/*.tar") == ["pipe:cat shards/*.tar"]
    with pytest.raises(ValueError, match="HTTP cannot list a folder"):
        shard_list("https://host/shards/*.tar")


def test_transform_sees_the_raw_sample(shards) -> None:
    ds = ShardedDataset(shards, transform=lambda s: (s["txt"].decode(), int(s["cls"])))
    assert ds[3] == ("text 3", 3)


def test_without_a_sidecar_the_headers_are_scanned_once_and_the_index_saved(shards) -> None:
    sidecar = shards[0] + INDEX_SUFFIX
    os.unlink(sidecar)
    ds = ShardedDataset(shards[:1])
    assert os.path.exists(sidecar)
    assert [ds[i]["__key__"] for i in range(8)] == [f"sample{i:05d}" for i in range(8)]


def test_a_stale_sidecar_is_rebuilt(shards, tmp_path) -> None:
    other = write_shards(numbered_samples(2, start=100), str(tmp_path / "other-%d.tar"))[0]
    os.replace(shards[0] + INDEX_SUFFIX, other + INDEX_SUFFIX)  # an index of another shard
    ds = ShardedDataset([other])
    assert [ds[i]["__key__"] for i in range(len(ds))] == ["sample00100", "sample00101"]


def test_shards_written_by_the_webdataset_package_read_as_they_are(tmp_path) -> None:
    wds = pytest.importorskip("webdataset")
    with wds.ShardWriter(str(tmp_path / "wds-%06d.tar"), maxcount=4) as sink:
        for i in range(10):
            sink.write({"__key__": f"k{i:03d}", "jpg": bytes([i]) * 100, "cls": str(i)})
    shards = sorted(str(p) for p in tmp_path.glob("wds-*.tar"))
    ds = ShardedDataset(shards)
    assert len(ds) == 10
    assert ds[7]["__key__"] == "k007"
    assert (ds[7]["jpg"], ds[7]["cls"]) == (bytes([7]) * 100, b"7")
    # and webdataset reads ours
    ours = write_shards(numbered_samples(5), str(tmp_path / "ours-%d.tar"))
    read = list(wds.WebDataset(ours, shardshuffle=False))
    assert [r["__key__"] for r in read] == [f"sample{i:05d}" for i in range(5)]
    assert read[2]["txt"] == b"text 2"


def test_gnu_tar_shards_with_long_names_and_directories(tmp_path) -> None:
    source = tmp_path / "src" / ("deep" * 30) / "dir"
    source.mkdir(parents=True)
    for i in range(3):
        (source / f"img{i}.jpg").write_bytes(b"J" * (1000 + i))
        (source / f"img{i}.cls").write_text(str(i))
    shard = tmp_path / "gnu.tar"
    files = sorted(str(p.relative_to(tmp_path / "src")) for p in source.iterdir())
    subprocess.run(
        ["tar", "--format=gnu", "-cf", str(shard), "-C", str(tmp_path / "src"), *files], check=True
    )
    ds = ShardedDataset([str(shard)])
    assert len(ds) == 3
    assert ds[1]["__key__"].endswith("dir/img1")
    assert ds[1]["jpg"] == b"J" * 1001
    assert ds[1]["cls"] == b"1"


def test_a_truncated_shard_is_an_error_naming_it(shards, tmp_path) -> None:
    broken = tmp_path / "broken.tar"
    with open(shards[0], "rb") as stream:
        broken.write_bytes(stream.read()[:3000])
    with pytest.raises(ShardFormatError, match=r"broken\.tar"):
        ShardedDataset([str(broken)])


def test_a_file_that_is_not_a_tar_is_an_error_naming_it(tmp_path) -> None:
    bogus = tmp_path / "bogus.tar"
    bogus.write_bytes(os.urandom(4096))
    with pytest.raises(ShardFormatError, match=r"bogus\.tar"):
        ShardedDataset([str(bogus)])


def test_a_missing_shard_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.tar"):
        ShardedDataset([str(tmp_path / "nope.tar")])


def test_a_shard_truncated_after_indexing_is_an_error_when_read(shards) -> None:
    ds = ShardedDataset(shards[:1])
    with open(shards[0], "r+b") as stream:
        stream.truncate(1500)
    with pytest.raises(ShardFormatError, match="truncated"):
        ds[7]


def test_through_the_loader_with_workers_every_sample_once(shards) -> None:
    ds = ShardedDataset(shards, transform=lambda s: int(s["txt"].split()[1]))
    loader = fl.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, generator=1)
    seen = np.concatenate(list(loader))
    assert sorted(seen.tolist()) == list(range(35))


def test_writing_refuses_bad_samples(tmp_path) -> None:
    with pytest.raises(ValueError, match="__key__"):
        write_shards([{"txt": "x"}], str(tmp_path / "s-%d.tar"))
    with pytest.raises(TypeError, match="list"):
        write_shards([{"__key__": "a", "txt": [1]}], str(tmp_path / "s-%d.tar"))
    assert not list(tmp_path.glob("*.tar"))  # nothing half-written is left


def test_max_size_starts_a_new_shard(tmp_path) -> None:
    samples = [{"__key__": f"s{i}", "bin": b"x" * 3000} for i in range(6)]
    paths = write_shards(samples, str(tmp_path / "s-%d.tar"), max_size=8000)
    assert len(paths) == 3  # two 3.5 KB members fit in 8,000 bytes
    with tarfile.open(paths[0]) as archive:
        assert archive.getnames() == ["s0.bin", "s1.bin"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_shards_it_opened_are_closed_when_it_goes(shards) -> None:
    before = len(os.listdir("/proc/self/fd"))
    dataset = ShardedDataset(shards)
    for i in range(0, len(dataset), 8):  # one sample of every shard: each opened once
        dataset[i]
    assert len(os.listdir("/proc/self/fd")) > before
    copy = pickle.loads(pickle.dumps(dataset))  # a copy opens (and closes) its own
    copy[0]
    del dataset, copy
    assert len(os.listdir("/proc/self/fd")) == before
