"""Token files: written and read back, documents found by an end token (cached beside the file,
or elsewhere when its folder is read-only), nanoGPT windows, and an error naming the file for
every kind of bad input."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

import flowloader as fl
from flowloader.text import TokenDataset, TokenWindows, write_tokens


def documents(count: int = 50, seed: int = 0, vocab: int = 1000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=int(n)) for n in rng.integers(0, 300, size=count)]


def test_written_documents_read_back_as_read_only_views(tmp_path) -> None:
    docs = documents()
    path = write_tokens(docs, tmp_path / "train.bin", dtype="uint16")
    ds = TokenDataset(path)
    assert len(ds) == len(docs)
    assert ds.lengths.tolist() == [len(d) for d in docs]
    assert ds.num_tokens == sum(len(d) for d in docs)
    for i, doc in enumerate(docs):
        assert ds[i].tolist() == doc.tolist()
    assert ds[3].dtype == np.uint16
    assert not ds[3].flags.writeable
    base = ds[3]
    while base.base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)  # a view of the map, not a copy
    assert [d.tolist() for d in ds.__getitems__([4, 0, 4])] == [
        docs[4].tolist(),
        docs[0].tolist(),
        docs[4].tolist(),
    ]
    copy = pickle.loads(pickle.dumps(ds))  # what spawn sends a worker: no tokens, only paths
    assert len(pickle.dumps(ds)) < 10_000
    assert copy[7].tolist() == docs[7].tolist()


def test_several_files_are_one_dataset(tmp_path) -> None:
    first, second = documents(10, seed=1), documents(7, seed=2)
    a = write_tokens(first, tmp_path / "a.bin", dtype="uint32")
    b = write_tokens(second, tmp_path / "b.bin", dtype="uint32")
    ds = TokenDataset([a, b])
    assert len(ds) == 17
    assert ds[12].tolist() == second[2].tolist()
    with pytest.raises(IndexError, match="out of range"):
        ds[17]


def write_until_interrupted(docs: list[np.ndarray], path, at: int) -> None:
    """write_tokens, interrupted (Ctrl-C) as it asks for document ``at``."""

    def interrupted():
        for k, doc in enumerate(docs):
            if k == at:
                raise KeyboardInterrupt
            yield doc

    with pytest.raises(KeyboardInterrupt):
        write_tokens(interrupted(), path)


def test_an_interrupted_write_continues_where_it_stopped(tmp_path) -> None:
    docs = documents(20_000, vocab=60_000)
    path = tmp_path / "big.bin"
    write_until_interrupted(docs, path, at=13_000)
    assert not path.exists()  # only a finished file takes its name
    seen = []
    write_tokens(docs, path, progress=lambda d, t: seen.append(d))
    assert seen[0] > 8192  # it went on after what an earlier run recorded
    reference = write_tokens(docs, tmp_path / "whole.bin")
    with open(reference, "rb") as whole:
        assert path.read_bytes() == whole.read()
    np.testing.assert_array_equal(np.load(f"{path}.idx.npy"), np.load(f"{reference}.idx.npy"))
    assert sorted(os.listdir(tmp_path)) == sorted(
        [
            "big.bin",
            "big.bin.idx.npy",
            "big.bin.idx.json",
            "whole.bin",
            "whole.bin.idx.npy",
            "whole.bin.idx.json",
        ]
    )


def nanogpt_file(tmp_path, docs, eos: int) -> str:
    """A nanoGPT-style file: documents joined by an end token, no index."""
    flat = np.concatenate([np.append(d, eos) for d in docs]).astype(np.uint16)
    path = str(tmp_path / "train.bin")
    flat.tofile(path)
    return path


def test_documents_found_by_their_end_token_and_the_scan_cached(tmp_path) -> None:
    docs = documents(30)
    path = nanogpt_file(tmp_path, docs, eos=50_000)
    ds = TokenDataset(path, dtype="uint16", eos_id=50_000)
    assert len(ds) == 30
    assert ds[4].tolist() == [*docs[4].tolist(), 50_000]
    assert os.path.exists(path + ".eos50000.uint16.idx.npy")
    again = TokenDataset(path, dtype="uint16", eos_id=50_000)
    np.testing.assert_array_equal(again.lengths, ds.lengths)


def test_the_scan_goes_to_the_cache_directory_when_the_folder_cannot_be_written(
    tmp_path, monkeypatch
) -> None:
    path = nanogpt_file(tmp_path, documents(5), eos=9999)
    from flowloader.text import index

    real = index.write_index

    def beside_the_file_fails(stem, *args, **kwargs):
        if stem.startswith(str(tmp_path) + os.sep + "train.bin"):
            raise PermissionError(13, "Permission denied", stem)
        return real(stem, *args, **kwargs)

    monkeypatch.setattr(index, "write_index", beside_the_file_fails)
    ds = TokenDataset(path, dtype="uint16", eos_id=9999, cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 5
    assert any(name.endswith(".npy") for name in os.listdir(tmp_path / "cache"))


def test_nanogpt_windows_inputs_and_targets(tmp_path) -> None:
    flat = np.arange(1000, dtype=np.uint16)
    flat.tofile(tmp_path / "train.bin")
    windows = TokenWindows(str(tmp_path / "train.bin"), 64, dtype="uint16")
    assert len(windows) == (1000 - 65) // 64 + 1
    w = windows[3]
    assert w["inputs"].tolist() == list(range(192, 256))
    assert w["targets"].tolist() == list(range(193, 257))
    strided = TokenWindows(str(tmp_path / "train.bin"), 64, stride=16, dtype="uint16")
    assert strided[2]["inputs"][0] == 32
    batch = next(iter(fl.DataLoader(windows, batch_size=4, shuffle=True, generator=1)))
    assert batch["inputs"].shape == (4, 64)
    np.testing.assert_array_equal(batch["targets"][:, :-1], batch["inputs"][:, 1:])


def test_windows_read_the_dtype_from_an_index(tmp_path) -> None:
    path = write_tokens(documents(20), tmp_path / "t.bin", dtype="uint32")
    assert TokenWindows(path, 16)[0]["inputs"].dtype == np.uint32


def odd_sized(p):
    (p / "odd.bin").write_bytes(b"\x00" * 7)
    return TokenDataset(str(p / "odd.bin"), dtype="uint16", eos_id=0)


def without_index(p):
    (p / "plain.bin").write_bytes(b"\x00" * 8)
    return TokenDataset(str(p / "plain.bin"))


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (odd_sized, ValueError, "odd.bin has 7 bytes"),
        (
            lambda p: TokenDataset(str(p / "missing.bin"), dtype="uint16", eos_id=0),
            FileNotFoundError,
            "missing.bin",
        ),
        (without_index, ValueError, "has no index"),
        (
            lambda p: write_tokens([[1, 2], [70_000]], p / "big.bin", dtype="uint16"),
            ValueError,
            "document 1 has token id 70000",
        ),
        (
            lambda p: write_tokens([[1, 2], [3, 99]], p / "v.bin", vocab_size=50),
            ValueError,
            "document 1 has token id 99, outside vocab_size=50",
        ),
        (lambda p: write_tokens([], p / "empty.bin"), ValueError, "no documents"),
        (lambda p: write_tokens([["a"]], p / "text.bin"), ValueError, "not a list of integer"),
        (
            lambda p: TokenDataset(str(write_tokens([[1]], p / "d.bin")), dtype="int8"),
            ValueError,
            "uint16 or uint32",
        ),
    ],
)
def test_bad_input_is_an_error_naming_the_file(tmp_path, make, error, match) -> None:
    with pytest.raises(error, match=match):
        make(tmp_path)


def test_an_index_that_does_not_match_its_file_is_refused(tmp_path) -> None:
    path = write_tokens(documents(5), tmp_path / "t.bin")
    with open(path, "ab") as more:
        more.write(b"\x01\x00")
    with pytest.raises(ValueError, match=r"t\.bin\.idx\.npy does not match .*t\.bin"):
        TokenDataset(path)
    offsets = np.array([0, 5, 3, 40], dtype=np.int64)
    np.save(tmp_path / "mine.npy", offsets)
    np.arange(40, dtype=np.uint16).tofile(tmp_path / "raw.bin")
    with pytest.raises(ValueError, match="decrease after document 1"):
        TokenDataset(
            str(tmp_path / "raw.bin"), dtype="uint16", doc_index=str(tmp_path / "mine.npy")
        )
    np.save(tmp_path / "past.npy", np.array([0, 5, 50], dtype=np.int64))
    with pytest.raises(ValueError, match="run from 0 to 50, the file has 40 tokens"):
        TokenDataset(
            str(tmp_path / "raw.bin"), dtype="uint16", doc_index=str(tmp_path / "past.npy")
        )


def test_ids_at_or_above_the_vocabulary_are_an_error_naming_the_document(tmp_path) -> None:
    path = write_tokens([[1, 2, 3], [4, 500, 6]], tmp_path / "t.bin")
    ds = TokenDataset(path, vocab_size=100)
    assert ds[0].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match=r"t.bin: document 1 has token id 500 at position 1"):
        ds[1]


def test_a_rerun_on_other_documents_is_refused_and_a_run_cut_at_its_end_starts_over(
    tmp_path,
) -> None:
    docs = documents(9000, vocab=60_000)
    path = tmp_path / "t.bin"
    write_until_interrupted(docs, path, at=8500)
    with pytest.raises(ValueError, match=r"the documents differ .* delete .*t\.bin\.partial"):
        write_tokens(documents(9000, seed=5, vocab=60_000), path)
    os.remove(f"{path}.partial")  # as if the run stopped after the rename, before the index
    write_tokens(docs, path)
    assert TokenDataset(path)[8999].tolist() == docs[8999].tolist()


def test_a_file_rewritten_with_the_same_size_is_scanned_again(tmp_path) -> None:
    path = tmp_path / "t.bin"
    np.array([5, 5, 0, 6, 6, 6, 0], dtype=np.uint16).tofile(path)
    assert [d.tolist() for d in TokenDataset(str(path), dtype="uint16", eos_id=0)] == [
        [5, 5, 0],
        [6, 6, 6, 0],
    ]
    np.array([7, 0, 8, 8, 8, 8, 0], dtype=np.uint16).tofile(path)
    os.utime(path, ns=(1, 1))  # another modification time, as any rewrite has
    assert [d.tolist() for d in TokenDataset(str(path), dtype="uint16", eos_id=0)] == [
        [7, 0],
        [8, 8, 8, 8, 0],
    ]


def test_an_empty_token_file_is_a_file_without_documents(tmp_path) -> None:
    full = nanogpt_file(tmp_path, documents(3), eos=9999)
    (tmp_path / "empty.bin").write_bytes(b"")
    for _ in range(2):  # the second time from the cached scans
        ds = TokenDataset([full, str(tmp_path / "empty.bin")], dtype="uint16", eos_id=9999)
        assert len(ds) == 3


def test_doc_index_needs_the_dtype(tmp_path) -> None:
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "raw.bin")
    np.save(tmp_path / "mine.npy", np.array([0, 4, 10], dtype=np.int64))
    with pytest.raises(ValueError, match="with doc_index=, say the ids' type"):
        TokenDataset(str(tmp_path / "raw.bin"), doc_index=str(tmp_path / "mine.npy"))
