"""The bad-sample policy: skip_errors drops the samples whose loading raises, reports each
one, keeps batches identical for any num_workers and resume exact, and max_skipped caps it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flowloader as fl
from flowloader.errors import SkippedSampleWarning, TooManySkippedError

from .loader_datasets import BadItemsStream, SomeBad, SomeBadBatches

pytestmark = pytest.mark.filterwarnings("ignore::flowloader.errors.SkippedSampleWarning")

EXPECTED = [[0, 1, 2], [6, 7, 8], [9, 10], [12, 13, 14], [15, 16, 17], [18, 19]]


def epoch(loader: fl.DataLoader) -> tuple[list, list, list]:
    """(batches as lists, the stats' skipped records, the warnings' messages)."""
    iterator = iter(loader)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = [np.asarray(batch).tolist() for batch in iterator]
    messages = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    return batches, iterator.stats().skipped, messages


@pytest.mark.parametrize("dataset", [SomeBad, SomeBadBatches], ids=["per-sample", "batch-path"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_bad_samples_are_dropped_from_their_batches(dataset, num_workers) -> None:
    loader = fl.DataLoader(dataset(), batch_size=3, num_workers=num_workers, skip_errors=ValueError)
    batches, skipped, messages = epoch(loader)
    assert batches == EXPECTED  # batch [3, 4, 5] lost all its samples and is passed over
    assert [s.index for s in skipped] == [3, 4, 5, 11]
    assert skipped[0].error == "ValueError: bad sample 3"
    assert len(messages) == 4
    assert "sample 11: ValueError: bad sample 11" in messages[-1]


def test_other_errors_still_raise() -> None:
    loader = fl.DataLoader(SomeBad(error=KeyError), batch_size=3, skip_errors=ValueError)
    with pytest.raises(KeyError, match="bad sample 3"):
        list(loader)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_count_budget_stops_at_the_same_batch_for_any_num_workers(num_workers) -> None:
    loader = fl.DataLoader(
        SomeBad(), batch_size=3, num_workers=num_workers, skip_errors=ValueError, max_skipped=3
    )
    delivered = []
    with pytest.raises(TooManySkippedError, match="skipped 4 of 12 samples") as caught:  # noqa: PT012
        for batch in loader:
            delivered.append(batch.tolist())
    assert delivered == EXPECTED[:2]  # the batch with the fourth skip is where it stops
    assert [s.index for s in caught.value.skipped] == [3, 4, 5, 11]
    assert "sample 3: ValueError: bad sample 3; sample 4" in str(caught.value)


def test_a_fraction_budget() -> None:
    loader = fl.DataLoader(SomeBad(), batch_size=3, skip_errors=ValueError, max_skipped=0.25)
    with pytest.raises(TooManySkippedError, match="skipped 3 of 6 samples"):
        list(loader)
    lenient = fl.DataLoader(SomeBad(), batch_size=3, skip_errors=ValueError, max_skipped=0.5)
    assert [b.tolist() for b in lenient] == EXPECTED


@pytest.mark.parametrize("num_workers", [0, 2])
def test_warnings_are_rate_limited(num_workers) -> None:
    bad = range(0, 600, 2)  # 300 of 600 samples fail
    loader = fl.DataLoader(
        SomeBad(bad=bad, n=600), batch_size=10, num_workers=num_workers, skip_errors=Exception
    )
    batches, skipped, messages = epoch(loader)
    assert sum(len(b) for b in batches) == 300
    assert len(skipped) == 300
    assert len(messages) == 5 + 3  # five one by one, then one every 100 skips
    assert "has skipped 300 samples of 600" in messages[-1]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_with_skips_is_exact(num_workers) -> None:
    def loader(workers):
        return fl.DataLoader(
            SomeBad(bad=(3, 4, 5, 11, 17), n=40), batch_size=3, shuffle=True,
            num_workers=workers, generator=7, skip_errors=ValueError,
        )  # fmt: skip

    whole = [b.tolist() for b in loader(num_workers)]
    first = loader(num_workers)
    iterator = iter(first)
    head = [next(iterator).tolist() for _ in range(4)]
    state = first.state_dict()
    del iterator
    resumed = loader(2 - num_workers)
    resumed.load_state_dict(state)
    assert head + [b.tolist() for b in resumed] == whole


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stream_skips_bad_items_and_goes_on(num_workers) -> None:
    loader = fl.DataLoader(
        BadItemsStream(), batch_size=4, num_workers=num_workers, skip_errors=ValueError
    )
    batches, skipped, _ = epoch(loader)
    items = sorted(int(x) for batch in batches for x in batch)
    assert items == [i for i in range(24) if i not in (2, 9, 10)]
    assert len(skipped) == 3
    assert all(s.index is None and s.where.startswith("item ") for s in skipped)
    assert {s.error for s in skipped} == {"ValueError: bad item 2", "ValueError: bad item 9",
                                          "ValueError: bad item 10"}  # fmt: skip


def test_without_batching_a_bad_sample_is_passed_over() -> None:
    loader = fl.DataLoader(SomeBad(), batch_size=None, skip_errors=ValueError)
    assert [float(x) for x in loader] == [i for i in range(20) if i not in (3, 4, 5, 11)]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"skip_errors": int}, TypeError, "Exception subclass"),
        ({"skip_errors": "ValueError"}, TypeError, "Exception subclass"),
        ({"skip_errors": KeyboardInterrupt}, TypeError, "Exception subclass"),
        ({"skip_errors": ValueError, "max_skipped": -1}, ValueError, "max_skipped should be"),
        ({"skip_errors": ValueError, "max_skipped": 1.5}, ValueError, "max_skipped should be"),
        ({"skip_errors": ValueError, "max_skipped": True}, ValueError, "max_skipped should be"),
        ({"max_skipped": 3}, ValueError, "needs skip_errors"),
    ],
)
def test_policy_arguments_are_checked(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fl.DataLoader(SomeBad(), **kwargs)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_corrupt_image_drops_only_itself_from_an_image_folder_batch(tmp_path, num_workers):
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    datasets.make_image_folder(str(tmp_path), num_classes=1, images_per_class=12, size=(40, 30))
    files = sorted((tmp_path / "class_000").iterdir())
    files[5].write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    transform = T.Compose([T.CenterCrop(24), T.ToTensor(), T.Normalize((0.5,) * 3, (0.2,) * 3)])
    ds = datasets.ImageFolder(str(tmp_path), transform=transform)
    loader = fl.DataLoader(ds, batch_size=4, num_workers=num_workers, skip_errors=OSError)
    iterator = iter(loader)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        batches = list(iterator)
    assert [len(labels) for _, labels in batches] == [4, 3, 4]
    (skip,) = iterator.stats().skipped
    assert skip.index == 5
    assert skip.path == str(files[5])
    assert "cannot load sample 5" in skip.error
    np.testing.assert_array_equal(batches[1][0][0], ds[4][0])  # the rest of its batch is intact
    np.testing.assert_array_equal(batches[1][0][1], ds[6][0])
