from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import flowloader as fl


class Stream(fl.IterableDataset):
    def __init__(self, n: int, reported: int | None = None) -> None:
        self.n, self.reported = n, reported

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        if self.reported is None:
            raise TypeError("no length")
        return self.reported


def arrays(n: int = 10) -> fl.TensorDataset:
    return fl.TensorDataset(np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n))


def test_batches_and_structure() -> None:
    batches = list(fl.DataLoader(arrays(), batch_size=4))
    assert len(batches) == 3
    x, y = batches[0]
    assert x.shape == (4, 2)
    assert x.dtype == np.float32
    assert y.tolist() == [0, 1, 2, 3]
    assert batches[-1][1].tolist() == [8, 9]


@pytest.mark.parametrize(
    ("n", "bs", "drop_last", "expected"),
    [(10, 4, False, 3), (10, 4, True, 2), (8, 4, True, 2), (3, 5, True, 0)],
)
def test_len_matches_batches(n, bs, drop_last, expected) -> None:
    loader = fl.DataLoader(arrays(n), batch_size=bs, drop_last=drop_last)
    assert len(loader) == expected == len(list(loader))


def test_default_batch_size_is_one() -> None:
    batches = list(fl.DataLoader([3, 4]))
    assert [b.tolist() for b in batches] == [[3], [4]]


def test_batch_size_none_yields_converted_samples() -> None:
    loader = fl.DataLoader([np.float32(1.5), np.float32(2.5)], batch_size=None)
    out = list(loader)
    assert len(loader) == 2
    assert all(isinstance(o, np.ndarray) and o.shape == () for o in out)


def test_reiteration_gives_a_new_epoch() -> None:
    loader = fl.DataLoader(arrays(), batch_size=5, shuffle=True, generator=0)
    first = np.concatenate([y for _, y in loader])
    second = np.concatenate([y for _, y in loader])
    assert sorted(first) == sorted(second) == list(range(10))
    assert first.tolist() != second.tolist()


def test_same_seed_same_order() -> None:
    def orders(seed):
        loader = fl.DataLoader(arrays(30), batch_size=7, shuffle=True, generator=seed)
        return [[y.tolist() for _, y in loader] for _ in range(2)]

    assert orders(5) == orders(5)
    assert orders(5) != orders(6)


def test_unseeded_loader_draws_fresh_orders() -> None:
    loader = fl.DataLoader(arrays(50), batch_size=50, shuffle=True)
    epochs = {tuple(next(iter(loader))[1].tolist()) for _ in range(3)}
    assert len(epochs) == 3


def test_custom_sampler_and_batch_sampler() -> None:
    loader = fl.DataLoader(arrays(), sampler=[9, 8, 7], batch_size=2)
    assert [y.tolist() for _, y in loader] == [[9, 8], [7]]
    loader = fl.DataLoader(arrays(), batch_sampler=[[1, 2, 3], [0]])
    assert [y.tolist() for _, y in loader] == [[1, 2, 3], [0]]
    assert len(loader) == 2


def test_custom_collate_fn() -> None:
    loader = fl.DataLoader(range(5), batch_size=2, collate_fn=sum)
    assert list(loader) == [1, 5, 4]


def test_dataset_with_getitems_is_fetched_per_batch() -> None:
    class Batched(fl.Dataset):
        def __init__(self):
            self.calls = []

        def __len__(self):
            return 6

        def __getitem__(self, i):
            raise AssertionError("per-sample path used")

        def __getitems__(self, indices):
            self.calls.append(indices)
            return [np.float32(i) for i in indices]

    ds = Batched()
    assert [b.tolist() for b in fl.DataLoader(ds, batch_size=4)] == [[0, 1, 2, 3], [4, 5]]
    assert ds.calls == [[0, 1, 2, 3], [4, 5]]


def test_iterable_dataset_batching_and_len() -> None:
    loader = fl.DataLoader(Stream(7, reported=7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    assert len(fl.DataLoader(Stream(7, reported=7), batch_size=3, drop_last=True)) == 2
    assert [b.tolist() for b in fl.DataLoader(Stream(7), batch_size=3, drop_last=True)] == [
        [0, 1, 2],
        [3, 4, 5],
    ]
    assert len(fl.DataLoader(Stream(7, reported=7), batch_size=None)) == 7


def test_iterable_dataset_without_len() -> None:
    with pytest.raises(TypeError):
        len(fl.DataLoader(Stream(3)))


def test_iterable_dataset_longer_than_reported_warns() -> None:
    loader = fl.DataLoader(Stream(5, reported=2), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="reported to be 2"):
        assert list(loader) == [0, 1, 2, 3, 4]


def test_frozen_attributes_after_init() -> None:
    loader = fl.DataLoader(arrays())
    for name in (
        "batch_size",
        "batch_sampler",
        "sampler",
        "drop_last",
        "dataset",
        "persistent_workers",
    ):
        with pytest.raises(ValueError, match=f"{name} attribute should not be set"):
            setattr(loader, name, None)
    loader.collate_fn = list  # other attributes stay settable, as in PyTorch
    assert isinstance(next(iter(loader)), list)


def test_multiprocessing_context_setter_validates() -> None:
    loader = fl.DataLoader(arrays(), num_workers=1)
    loader.multiprocessing_context = "spawn"
    assert loader.multiprocessing_context.get_start_method() == "spawn"
    with pytest.raises(ValueError, match="start method"):
        loader.multiprocessing_context = "nope"
    with pytest.raises(ValueError, match="num_workers > 0"):
        fl.DataLoader(arrays()).multiprocessing_context = "spawn"


def test_timeout_without_workers_is_refused_at_iter() -> None:
    loader = fl.DataLoader(arrays(), timeout=3)
    with pytest.raises(AssertionError, match="timeout"):
        iter(loader)


def test_pin_memory_warns_and_has_no_effect() -> None:
    loader = fl.DataLoader(arrays(), batch_size=5, pin_memory=True)
    with pytest.warns(UserWarning, match="pin_memory"):
        batches = list(loader)
    assert len(batches) == 2


def test_too_many_workers_warns() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match="worker processes"):
        fl.DataLoader(arrays(), num_workers=cpus + 1)


def test_iterator_protocol() -> None:
    loader = fl.DataLoader(arrays(), batch_size=4)
    iterator = iter(loader)
    assert iter(iterator) is iterator
    assert len(iterator) == 3
    next(iterator)
    with pytest.raises(NotImplementedError, match="pickled"):
        iterator.__getstate__()


def test_worker_info_is_none_in_main_process() -> None:
    assert fl.get_worker_info() is None


def test_exceptions_from_the_dataset_propagate_unchanged() -> None:
    class Broken(fl.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            raise KeyError(f"bad {i}")

    with pytest.raises(KeyError, match="bad 0"):
        next(iter(fl.DataLoader(Broken())))


def test_dir_lists_the_public_names_not_the_package_s_own_imports() -> None:
    names = dir(fl)
    assert set(fl.__all__) <= set(names)
    assert {"utils", "vision", "tables", "dataloader", "__version__"} <= set(names)
    assert not {"importlib", "Any", "types"} & set(names)


def test_utils_data_exposes_the_same_names() -> None:
    from flowloader.utils import data

    assert set(data.__all__) == set(fl.__all__)
    torch_data = sys.modules.get("torch.utils.data")  # imported by the drop-in if installed
    for name in set(fl.__all__) - {"DataLoader"}:  # (the drop-in's hands out tensors)
        ours, theirs = getattr(data, name), getattr(fl, name)
        if ours is theirs:
            continue
        # Where torch is installed, the drop-in's classes are torch's classes too.
        assert torch_data is not None, name
        torch_kind = getattr(torch_data, name)
        assert not isinstance(ours, type) or issubclass(ours, torch_kind), name
    assert issubclass(data.DataLoader, fl.DataLoader)


def test_output_torch_works_without_the_program_importing_torch() -> None:
    """output="torch" imports torch itself (a script that never imports torch)."""
    pytest.importorskip("torch")
    code = (
        "import numpy as np, flowloader as fl\n"
        "batch = next(iter(fl.DataLoader(np.arange(4), batch_size=2, output='torch')))\n"
        "print(type(batch).__module__, batch.tolist())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch", "[0,", "1]"]
