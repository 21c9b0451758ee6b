"""Start methods, seeding, worker info and worker_init_fn."""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl

from .loader_datasets import Arrays, RandomDraws, Stream, record_worker_id


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_other_start_methods(method) -> None:
    loader = fl.DataLoader(
        Arrays(10),
        batch_size=4,
        num_workers=2,
        multiprocessing_context=method,
        shuffle=True,
        generator=1,
    )
    expected = [
        b["label"].tolist()
        for b in fl.DataLoader(Arrays(10), batch_size=4, shuffle=True, generator=1)
    ]
    assert [b["label"].tolist() for b in loader] == expected


@pytest.mark.timeout(120)
def test_spawn_with_an_iterable_dataset() -> None:
    loader = fl.DataLoader(Stream(9), batch_size=2, num_workers=2, multiprocessing_context="spawn")
    assert sorted(int(v) for b in loader for v in b) == list(range(9))


def draws(seed: int, workers: int = 2) -> list:
    loader = fl.DataLoader(RandomDraws(), batch_size=None, num_workers=workers, generator=seed)
    return [(tuple(x.tolist()), int(s)) for x, s in loader]


def test_workers_draw_different_numbers_and_seeds_reproduce() -> None:
    first = draws(0)
    # Workers 0 and 1 load alternate samples; their first draws must differ.
    assert first[0][0] != first[1][0]
    assert first[0][1] + 1 == first[1][1]  # worker seed = base seed + worker id
    assert draws(0) == first
    assert draws(1) != first


@pytest.mark.torch
def test_torch_is_seeded_per_worker_when_imported() -> None:
    pytest.importorskip("torch")
    from .loader_datasets import TorchDraws

    def run(seed):
        return list(fl.DataLoader(TorchDraws(), batch_size=None, num_workers=2, generator=seed))

    first = run(5)
    assert first[0] != first[1]  # samples 0 and 1 come from different workers
    assert run(5) == first


def test_pool_of_segments_stays_bounded_when_batches_are_dropped() -> None:
    loader = fl.DataLoader(Arrays(800), batch_size=4, num_workers=2)
    iterator = iter(loader)
    cache = iterator._transport.ledger.cache  # the main process's mapping of every worker segment
    live, created = [], set()
    for i, _ in enumerate(iterator):
        if i % 10 == 9:
            live.append(len(cache))
            created.update(cache._segments)
    # 200 batches went through: segments are reused, not made per batch. A worker's working
    # set is what it has in flight, what the consumer holds and releases still in transit.
    assert max(live) <= 12, live
    assert len(created) <= 16, sorted(created)


def test_worker_info_and_init_fn() -> None:
    class Info(fl.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            import os

            info = fl.get_worker_info()
            assert info.dataset is not None
            return np.array([info.id, info.num_workers, int(os.environ["FLOWLOADER_TEST_WORKER"])])

    loader = fl.DataLoader(Info(), batch_size=None, num_workers=2, worker_init_fn=record_worker_id)
    rows = [x.tolist() for x in loader]
    assert rows == [[0, 2, 0], [1, 2, 1], [0, 2, 0], [1, 2, 1]]


def test_pin_memory_warns_with_workers_too() -> None:
    with pytest.warns(UserWarning, match="pin_memory"):
        assert (
            len(list(fl.DataLoader(Arrays(4), batch_size=2, num_workers=1, pin_memory=True))) == 2
        )


class Pictures(fl.Dataset):
    """Samples of 48 KiB: a batch of 4 is 192 KiB of images and 32 bytes of labels."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        return {"image": np.full((3, 64, 64), i, np.float32), "label": i}


def test_batches_are_zero_copy_views_of_one_segment() -> None:
    batch = next(iter(fl.DataLoader(Pictures(), batch_size=4, num_workers=1)))
    image, label = batch["image"], batch["label"]
    assert image.base is not None  # a view of the batch's shared memory
    assert image.flags.writeable
    assert label.base is None  # small arrays are copies: keeping them keeps no segment
    assert label.tolist() == [0, 1, 2, 3]
    assert image[:, 0, 0, 0].tolist() == [0, 1, 2, 3]
    small = next(iter(fl.DataLoader(Arrays(8), batch_size=4, num_workers=1)))
    assert small["image"].base is None  # a batch of small arrays only: all copies


class NoneSamples(fl.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        return None if i % 2 else i


def test_a_sample_that_is_none_travels_without_batching() -> None:
    loader = fl.DataLoader(NoneSamples(), batch_size=None, num_workers=2)
    assert list(loader) == [0, None, 2, None]
