"""CIFAR-10 / CIFAR-100: torchvision's layout and attributes, the batch fast path, download
from a loopback server, safe extraction, and pickles that are refused instead of run."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile

import numpy as np
import pytest
from PIL import Image

import flowloader as fl
from flowloader.vision import datasets
from flowloader.vision import transforms as T
from flowloader.vision.datasets.cifar import CIFARFormatError
from flowloader.vision.datasets.safe_pickle import UnsafePickleError
from flowloader.vision.datasets.utils import UnsafeArchiveError, extract_tar

from .serving import serve_directory

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)
CIFAR_TRANSFORM = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])


@pytest.fixture(scope="module")
def cifar_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("cifar"))
    datasets.make_cifar(root, train_size=250, test_size=40)
    datasets.make_cifar(root, cifar100=True, train_size=120, test_size=30)
    return root


def plain_load(path):
    with open(path, "rb") as stream:  # our own test files: trusted here
        return pickle.load(stream, encoding="latin1")


def test_layout_and_attributes_follow_torchvision(cifar_root) -> None:
    folder = os.path.join(cifar_root, "cifar-10-batches-py")
    assert sorted(os.listdir(folder)) == [
        "batches.meta", "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
        "data_batch_5", "test_batch",
    ]  # fmt: skip
    train = datasets.CIFAR10(cifar_root)
    assert len(train) == 250
    assert train.data.shape == (250, 32, 32, 3)
    assert train.data.dtype == np.uint8
    assert isinstance(train.targets, list)
    assert all(type(t) is int for t in train.targets)
    assert train.classes[0] == "airplane"
    assert train.class_to_idx["truck"] == 9
    # The planes of the files, read independently, in torchvision's HWC order.
    entries = [plain_load(os.path.join(folder, f"data_batch_{i}")) for i in range(1, 6)]
    planes = np.vstack([e["data"] for e in entries]).reshape(-1, 3, 32, 32)
    np.testing.assert_array_equal(train.data, planes.transpose(0, 2, 3, 1))
    assert train.targets == [label for e in entries for label in e["labels"]]
    image, target = train[3]
    assert isinstance(image, Image.Image)
    assert image.mode == "RGB"
    assert image.size == (32, 32)
    np.testing.assert_array_equal(np.asarray(image), train.data[3])
    assert target == train.targets[3]
    test = datasets.CIFAR10(cifar_root, train=False)
    assert len(test) == 40
    assert "Split: Test" in repr(test)


def test_cifar100_uses_fine_labels_and_its_own_folder(cifar_root) -> None:
    train = datasets.CIFAR100(cifar_root)
    assert len(train) == 120
    assert len(train.classes) == 100
    entry = plain_load(os.path.join(cifar_root, "cifar-100-python", "train"))
    assert train.targets == entry["fine_labels"]
    assert len(datasets.CIFAR100(cifar_root, train=False)) == 30


def test_targets_assign_as_a_list(cifar_root) -> None:
    ds = datasets.CIFAR10(cifar_root, train=False)
    ds.targets = [0] * len(ds)
    assert ds[5][1] == 0
    with pytest.raises(ValueError, match="expected 40 targets"):
        ds.targets = [1, 2]


def test_batch_path_is_bit_identical_to_per_sample_path(cifar_root) -> None:
    ds = datasets.CIFAR10(cifar_root, transform=CIFAR_TRANSFORM)
    indices = [7, 0, 249, 7, 31]
    batch = fl.default_collate(ds.__getitems__(indices))
    one_by_one = fl.default_collate([ds[i] for i in indices])
    assert batch[0].dtype == np.float32
    assert batch[0].shape == (5, 3, 32, 32)
    np.testing.assert_array_equal(batch[0], one_by_one[0])
    np.testing.assert_array_equal(batch[1], one_by_one[1])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_batches_match_per_sample_loading_with_random_flips(cifar_root, num_workers):
    transform = T.Compose([T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    fast = datasets.CIFAR10(cifar_root, transform=transform)

    class PerSample(datasets.CIFAR10):  # overriding __getitem__ turns the batch path off
        def __getitem__(self, index):
            return super().__getitem__(index)

    slow = PerSample(cifar_root, transform=transform)

    def epoch(ds, workers):
        loader = fl.DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers, generator=4)
        return list(loader)

    for (a, la), (b, lb) in zip(epoch(fast, num_workers), epoch(slow, 0), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


def test_missing_dataset_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(RuntimeError, match=r"Dataset not found or corrupted.*download=True"):
        datasets.CIFAR10(str(tmp_path))


def test_truncated_batch_file_names_the_file(tmp_path) -> None:
    folder = datasets.make_cifar(str(tmp_path), train_size=50, test_size=10)
    path = os.path.join(folder, "data_batch_2")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(pickle.UnpicklingError, match=r"data_batch_2.*truncated or corrupt"):
        datasets.CIFAR10(str(tmp_path))


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"data": np.zeros((2, 3072), np.uint8)}, "expected a dict with 'data' and 'labels'"),
        ({"data": np.zeros((2, 100), np.uint8), "labels": [0, 1]}, r"shape \(N, 3072\)"),
        ({"data": np.zeros((2, 3072), np.float32), "labels": [0, 1]}, "should be uint8"),
        ({"data": np.zeros((2, 3072), np.uint8), "labels": [0]}, "2 images but 'labels'"),
        ({"data": np.zeros((2, 3072), np.uint8), "labels": [0, 10]}, r"lie in \[0, 10\)"),
        ([1, 2], "found list"),
    ],
)
def test_malformed_batch_files_say_what_is_wrong(tmp_path, entry, match) -> None:
    folder = datasets.make_cifar(str(tmp_path), train_size=50, test_size=10)
    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump(entry, f, protocol=2)
    with pytest.raises(CIFARFormatError, match=f"test_batch: .*{match}"):
        datasets.CIFAR10(str(tmp_path), train=False)


class _Payload:
    """Pickles as a call that creates ``path``: what a crafted dataset file would do."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_crafted_pickle_is_refused_and_runs_nothing(tmp_path, where) -> None:
    folder = datasets.make_cifar(str(tmp_path), train_size=50, test_size=10)
    victim = tmp_path / "created-by-the-pickle"
    payload = _Payload(str(victim))
    entry = payload if where == "top" else {"data": payload, "labels": [0]}
    with open(os.path.join(folder, "test_batch"), "wb") as f:
        pickle.dump(entry, f, protocol=2)
    with pytest.raises(
        UnsafePickleError, match=r"test_batch: refusing to load (io|builtins)\.open"
    ):
        datasets.CIFAR10(str(tmp_path), train=False)
    assert not victim.exists()
    # The payload is real: an unrestricted pickle.load would have created the file.
    control = tmp_path / "created-by-plain-pickle"
    pickle.loads(pickle.dumps(_Payload(str(control)), protocol=2)).close()
    assert control.exists()


def test_a_crafted_bytes_constructor_is_refused(tmp_path) -> None:
    path = tmp_path / "codec"
    # protocol 2's bytes rebuild (_codecs.encode) with another codec than latin1
    crafted = b"\x80\x02c_codecs\nencode\nq\x00X\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R."
    path.write_bytes(crafted)
    from flowloader.vision.datasets import safe_pickle

    with pytest.raises(UnsafePickleError, match="rot13"):
        safe_pickle.load(str(path))


def make_tar(path, members) -> None:
    """members: (TarInfo, bytes or None)."""
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)


def file_member(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def link_member(name: str, target: str, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


@pytest.mark.parametrize(
    ("members", "match"),
    [
        ([file_member("ok"), file_member("../escaped")], "'../escaped'.*outside"),
        ([file_member("/tmp/flowloader-absolute-escape")], "outside"),
        ([file_member("a/../../escaped")], "outside"),
        ([link_member("link", "../../etc")], "links to '../../etc'"),
        ([link_member("link", "/etc/passwd")], "links to '/etc/passwd'"),
        ([link_member("hard", "../outside", hard=True)], "links to"),
    ],
)
def test_extraction_refuses_members_that_escape(tmp_path, members, match) -> None:
    archive = tmp_path / "evil.tar.gz"
    make_tar(archive, members)
    target = tmp_path / "root" / "inner"
    with pytest.raises(UnsafeArchiveError, match=f"evil.tar.gz: refusing .*{match}"):
        extract_tar(str(archive), str(target))
    assert not (tmp_path / "root" / "escaped").exists()
    assert not (tmp_path / "escaped").exists()
    assert not os.path.exists("/tmp/flowloader-absolute-escape")
    assert not target.exists() or os.listdir(target) == []  # checked before anything is written


def test_extraction_of_a_normal_archive(tmp_path) -> None:
    archive = tmp_path / "fine.tar.gz"
    make_tar(
        archive, [file_member("d/a", b"1"), file_member("d/b", b"22"), link_member("d/c", "a")]
    )
    extract_tar(str(archive), str(tmp_path / "out"))
    assert (tmp_path / "out" / "d" / "b").read_bytes() == b"22"
    assert (tmp_path / "out" / "d" / "c").read_bytes() == b"1"


@pytest.fixture
def cifar_server(tmp_path):
    """A loopback HTTP server with a CIFAR-10 archive made from sample data; yields
    (url, md5 of the archive)."""
    served = tmp_path / "served"
    datasets.make_cifar(str(tmp_path / "src"), train_size=60, test_size=20)
    served.mkdir()
    archive = served / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()

    with serve_directory(str(served)) as url:
        yield url + "cifar-10-python.tar.gz", md5


def test_download_checks_the_archive_and_unpacks_it(tmp_path, cifar_server, monkeypatch):
    url, md5 = cifar_server
    monkeypatch.setattr(datasets.CIFAR10, "url", url)
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", md5)
    root = str(tmp_path / "data")
    train = datasets.CIFAR10(root, download=True)
    assert len(train) == 60
    assert len(datasets.CIFAR10(root, train=False, download=True)) == 20
    assert os.path.isfile(os.path.join(root, "cifar-10-python.tar.gz"))


def test_download_with_a_bad_checksum_fails(tmp_path, cifar_server, monkeypatch) -> None:
    url, _ = cifar_server
    monkeypatch.setattr(datasets.CIFAR10, "url", url)
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", "0" * 32)
    with pytest.raises(RuntimeError, match="md5 does not match"):
        datasets.CIFAR10(str(tmp_path / "data"), download=True)
    assert not os.path.exists(tmp_path / "data" / "cifar-10-batches-py")


@pytest.mark.parametrize("name", ["CIFAR10", "CIFAR100"])
def test_live_against_torchvision_when_available(cifar_root, name, monkeypatch) -> None:
    cifar = pytest.importorskip("torchvision.datasets.cifar")
    # torchvision hashes every file against the real dataset's md5: sample data cannot pass.
    monkeypatch.setattr(cifar, "check_integrity", lambda path, md5=None: os.path.isfile(path))
    for train in (True, False):
        theirs = getattr(cifar, name)(cifar_root, train=train)
        ours = getattr(datasets, name)(cifar_root, train=train)
        np.testing.assert_array_equal(ours.data, theirs.data)
        assert ours.targets == theirs.targets
        assert ours.classes == theirs.classes
        assert ours.class_to_idx == theirs.class_to_idx
        for i in (0, len(ours) - 1):
            np.testing.assert_array_equal(np.asarray(ours[i][0]), np.asarray(theirs[i][0]))
            assert ours[i][1] == theirs[i][1]
