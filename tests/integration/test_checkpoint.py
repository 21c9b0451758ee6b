"""Exact resume: state_dict() anywhere in an epoch, load_state_dict() into a fresh loader,
identical batches afterwards, whatever num_workers before and after."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowloader as fl
from flowloader.vision import datasets
from flowloader.vision import transforms as T

from .checkpoint import epochs, round_trip
from .loader_datasets import Augmented, Stream


def augmented_loader(n: int, batch_size: int, drop_last: bool, shuffle: bool, seed: int):
    def make(workers: int) -> fl.DataLoader:
        return fl.DataLoader(
            Augmented(n),
            batch_size=batch_size,
            drop_last=drop_last,
            shuffle=shuffle,
            num_workers=workers,
            generator=seed,
        )

    return make


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same 30 cases on every run: a failure reproduces
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 30),
    batch_size=st.integers(1, 7),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    workers=st.sampled_from([(0, 0), (0, 2), (2, 0), (1, 3), (2, 2)]),
    stop_epoch=st.integers(0, 1),
    where=st.floats(0, 1),
    seed=st.integers(0, 2**32),
)
def test_round_trip(n, batch_size, drop_last, shuffle, workers, stop_epoch, where, seed) -> None:
    make = augmented_loader(n, batch_size, drop_last, shuffle, seed)
    length = len(make(0))
    stop_batch = round(where * length)  # 0 (start), the middle, or length (the end)
    round_trip(make, stop_epoch, stop_batch, *workers, total_epochs=2)


@pytest.mark.parametrize("stop_batch", [0, 3, 6])
def test_round_trip_with_persistent_workers(stop_batch) -> None:
    def make(workers):
        return fl.DataLoader(
            Augmented(24),
            batch_size=4,
            shuffle=True,
            generator=9,
            num_workers=workers,
            persistent_workers=workers > 0,
        )

    round_trip(make, 1, stop_batch, 2, 1)


def test_round_trip_without_a_seed_follows_numpy_global_state() -> None:
    def make(workers):
        np.random.seed(11)  # as a script that seeds NumPy once at start
        return fl.DataLoader(Augmented(20), batch_size=3, shuffle=True, num_workers=workers)

    round_trip(make, 1, 2, 0, 2)


def test_numpy_s_global_generator_is_saved_as_text_and_its_old_list_form_still_loads() -> None:
    def make() -> fl.DataLoader:
        return fl.DataLoader(list(range(100)), batch_size=8, shuffle=True)

    np.random.seed(3)
    loader = make()
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    rest = [batch.tolist() for batch in iterator]
    key = state["generator"]["state"]["state"]["key"]
    assert isinstance(key, str)  # 624 words as base64 text, a third of them as numbers
    # The sampler draws from the same global generator: its state is saved once.
    assert state["sampler"]["generator"]["state"] == "as the loader's generator"
    assert len(json.dumps(state)) < 4096
    old = json.loads(json.dumps(state))  # as states were saved before: the words as numbers,
    words = np.frombuffer(base64.b64decode(key), "<u4")  # in the loader's part and the sampler's
    old["generator"]["state"]["state"]["key"] = words.tolist()
    old["sampler"]["generator"] = copy.deepcopy(old["generator"])
    for saved in (state, old):
        np.random.seed(99)  # another job's global state: the saved one replaces it
        resumed = make()
        resumed.load_state_dict(saved)
        assert [batch.tolist() for batch in resumed] == rest


def test_numpy_s_global_generator_is_each_rank_s_own_part_and_the_shared_part_agrees() -> None:
    """DCP's fixed form: the sampler's reference stays in the part every rank shares, the
    state words (each process's own) go to the rank's part, so ranks seeded apart agree."""
    from flowloader import _state

    parts = []
    for rank, seed in enumerate((1, 2)):
        np.random.seed(seed)
        state = fl.DataLoader(list(range(40)), batch_size=4, shuffle=True).state_dict()
        parts.append(_state.fixed_form(state, rank))
    assert parts[0]["state"] == parts[1]["state"]
    assert len(parts[0]["state"]) < 1000
    assert parts[0]["rank_0"] != parts[1]["rank_1"]
    assert 3300 < len(parts[0]["rank_0"]) < 3700  # MT19937's 624 words, once


def test_round_trip_with_random_transforms_and_a_sampler() -> None:
    root = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"flowloader-ckpt-{os.getpid()}")
    datasets.make_image_folder(root, num_classes=2, images_per_class=8, size=(48, 40))
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])

    def make(workers):
        ds = datasets.ImageFolder(root, transform=transform)
        sampler = fl.RandomSampler(ds, replacement=True, num_samples=12, generator=4)
        return fl.DataLoader(ds, batch_size=5, sampler=sampler, num_workers=workers, generator=8)

    round_trip(make, 1, 1, 2, 0)


def test_distributed_sampler_state_travels() -> None:
    def make(workers):
        sampler = fl.DistributedSampler(range(20), num_replicas=2, rank=1, seed=3)
        sampler.set_epoch(5)
        return fl.DataLoader(list(range(20)), batch_size=3, sampler=sampler, num_workers=workers)

    round_trip(make, 0, 2, 1, 0, total_epochs=1)


def test_iterable_dataset_fast_forwards() -> None:
    def make(workers):
        return fl.DataLoader(Stream(20), batch_size=3, num_workers=workers)

    round_trip(make, 0, 2, 2, 2, total_epochs=1)


def test_randomness_is_the_same_for_any_num_workers() -> None:
    runs = [epochs(augmented_loader(17, 4, False, True, 5)(w), 2) for w in (0, 1, 2, 3)]
    assert runs[0] == runs[1] == runs[2] == runs[3]
    assert runs[0] != epochs(augmented_loader(17, 4, False, True, 6)(0), 2)


def test_state_is_small_and_json_safe() -> None:
    loader = augmented_loader(100, 8, False, True, 1)(0)
    iterator = iter(loader)
    next(iterator)
    text = json.dumps(loader.state_dict())
    assert len(text) < 2000
    assert json.loads(text)["batches_yielded"] == 1


def mid_epoch_state(loader: fl.DataLoader, batches: int = 2) -> dict:
    iterator = iter(loader)
    for _ in range(batches):
        next(iterator)
    return loader.state_dict()


@pytest.mark.parametrize(
    ("other", "match"),
    [
        (
            lambda: fl.DataLoader(Augmented(24), batch_size=4, shuffle=True, generator=1),
            "dataset_length",
        ),
        (
            lambda: fl.DataLoader(Augmented(23), batch_size=4, generator=1),
            "sampler order: saved 'random', this loader 'sequential'",
        ),
        (
            lambda: fl.DataLoader(
                Augmented(23),
                sampler=fl.RandomSampler(Augmented(23), replacement=True, generator=1),
                batch_size=4,
            ),
            "sampler replacement: saved False, this loader True",
        ),
    ],
)
def test_a_state_that_does_not_fit_is_refused(other, match) -> None:
    saved = fl.DataLoader(Augmented(23), batch_size=4, shuffle=True, generator=1)
    with pytest.raises(ValueError, match=match):
        other().load_state_dict(mid_epoch_state(saved))


@pytest.mark.parametrize(
    "other",
    [
        lambda: fl.DataLoader(Augmented(23), batch_size=5, shuffle=True, generator=1),
        lambda: fl.DataLoader(Augmented(23), batch_size=4, generator=1),
        lambda: fl.DataLoader(
            Augmented(23), batch_size=4, shuffle=True, drop_last=True, generator=1
        ),
    ],
    ids=["batch_size", "sampler", "drop_last"],
)
def test_settings_may_change_where_nothing_of_the_epoch_was_read(other) -> None:
    """Between epochs (here before the first) the next epoch's settings are free: nothing
    read depends on them."""
    state = fl.DataLoader(Augmented(23), batch_size=4, shuffle=True, generator=1).state_dict()
    resumed = other()
    resumed.load_state_dict(state)
    expected = other()
    assert [b.tolist() for b in resumed] == [b.tolist() for b in expected]


@pytest.mark.parametrize("batch_size", [3, 4, 5, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_new_batch_size_regroups_what_is_left(batch_size, shuffle) -> None:
    """The positions read stay a prefix of the sampler's order whatever the grouping: a
    resume with another batch size (or drop_last) delivers every other sample once."""
    saved = fl.DataLoader(np.arange(23), batch_size=4, shuffle=shuffle, generator=1)
    state = mid_epoch_state(saved, batches=3)
    read = [
        i
        for b in fl.DataLoader(np.arange(23), batch_size=4, shuffle=shuffle, generator=1)
        for i in b.tolist()
    ][:12]
    resumed = fl.DataLoader(np.arange(23), batch_size=batch_size, shuffle=shuffle, generator=1)
    resumed.load_state_dict(state)
    rest = [b.tolist() for b in resumed]
    assert all(len(b) == batch_size for b in rest[:-1])
    assert sorted(read + [i for b in rest for i in b]) == list(range(23))
    # a state taken in the regrouped run resumes as exactly
    again = fl.DataLoader(np.arange(23), batch_size=batch_size, shuffle=shuffle, generator=1)
    again.load_state_dict(state)
    iterator = iter(again)
    first = next(iterator).tolist()
    later = fl.DataLoader(np.arange(23), batch_size=2, shuffle=shuffle, generator=1)
    later.load_state_dict(again.state_dict())
    assert read + first + [i for b in later for i in b.tolist()] == read + [
        i for b in rest for i in b
    ]


def test_malformed_states_are_refused() -> None:
    loader = fl.DataLoader(Augmented(5))
    with pytest.raises(ValueError, match="not a flowloader"):
        loader.load_state_dict({"epoch": 1})
    state = loader.state_dict()
    state["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        loader.load_state_dict(state)
    state["version"] = 2  # the previous format: refused, saying why and what to do
    with pytest.raises(ValueError, match=r"version 2 .*replay the last epoch's order.*afresh"):
        loader.load_state_dict(state)


def test_generator_kind_must_match() -> None:
    state = fl.DataLoader(Augmented(5), shuffle=True, generator=1).state_dict()
    unseeded = fl.DataLoader(Augmented(5), shuffle=True)
    with pytest.raises(
        ValueError, match="generator: saved a numpy generator, this loader's is None"
    ):
        unseeded.load_state_dict(state)


class FirstIsSlow(fl.Dataset):
    """Sample 0 takes 50 ms, the others none: with in_order=False, later batches come first."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> int:
        if i == 0:
            time.sleep(0.05)
        return i


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["multiprocessing", "thread"])
def test_out_of_order_states_are_refused_unless_what_was_delivered_is_a_prefix(method) -> None:
    """A state after any batch is refused while a batch came ahead of one still loading, and
    otherwise resumes exactly (whatever the workers' timing makes of the order)."""
    options = {"batch_size": 2, "collate_fn": list}
    loader = fl.DataLoader(
        FirstIsSlow(), num_workers=2, worker_method=method, in_order=False, **options
    )
    got: list[int] = []
    refused = accepted = 0
    for batch in loader:
        got += batch
        try:
            state = loader.state_dict()
        except ValueError as error:
            assert "not a prefix" in str(error)  # noqa: PT017
            refused += 1
            continue
        accepted += 1
        again = fl.DataLoader(FirstIsSlow(), **options)
        again.load_state_dict(state)
        assert sorted(got + [i for b in again for i in b]) == list(range(40))
    assert accepted >= 1  # after the last batch at least: everything delivered
    assert refused + accepted == 20


@pytest.mark.timeout(120)
def test_resume_in_a_fresh_process_after_the_first_was_killed(tmp_path) -> None:
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = textwrap.dedent(
        f"""
        import json, os, sys
        sys.path.insert(0, {tests_dir!r})
        import flowloader as fl
        from integration.loader_datasets import Augmented
        from integration.checkpoint import as_bytes
        loader = fl.DataLoader(Augmented(30), batch_size=4, shuffle=True, generator=21,
                               num_workers=int(sys.argv[2]))
        state_path, out_path = sys.argv[1], sys.argv[3]
        if sys.argv[4] == "train":
            for step, batch in enumerate(loader):
                if step == 3:
                    with open(state_path, "w") as f:
                        json.dump(loader.state_dict(), f)
                    os.kill(os.getpid(), 9)  # the job is killed
        else:
            with open(state_path) as f:
                loader.load_state_dict(json.load(f))
            with open(out_path, "wb") as out:
                for epoch in range(2):
                    for batch in loader:
                        out.write(as_bytes(batch).hex().encode() + b"\\n")
        """
    )
    state, out = tmp_path / "state.json", tmp_path / "out.txt"
    killed = subprocess.run(
        [sys.executable, "-c", script, str(state), "2", str(out), "train"], timeout=60
    )
    assert killed.returncode == -9
    resumed = subprocess.run(
        [sys.executable, "-c", script, str(state), "1", str(out), "resume"], timeout=60
    )
    assert resumed.returncode == 0
    reference = epochs(fl.DataLoader(Augmented(30), batch_size=4, shuffle=True, generator=21), 2)
    assert [bytes.fromhex(line) for line in out.read_text().split()] == reference[4:]


def test_image_augmentations_are_byte_identical_for_any_num_workers(tmp_path) -> None:
    datasets.make_image_folder(str(tmp_path), num_classes=2, images_per_class=10, size=(60, 45))
    transform = T.Compose(
        [
            T.RandomResizedCrop(32),
            T.RandomHorizontalFlip(),
            T.RandomVerticalFlip(),
            T.ColorJitter(0.4, 0.4, 0.4, 0.1),
            T.ToTensor(),
            T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
        ]
    )
    ds = datasets.ImageFolder(str(tmp_path), transform=transform)
    runs = [
        epochs(fl.DataLoader(ds, batch_size=6, shuffle=True, num_workers=w, generator=3), 2)
        for w in (0, 1, 2, 3)
    ]
    assert runs[0] == runs[1] == runs[2] == runs[3]
    assert runs[0][:4] != runs[0][4:8]  # epochs differ


def test_global_rng_code_keeps_per_worker_seeding() -> None:
    from .loader_datasets import RandomDraws

    loader = fl.DataLoader(RandomDraws(), batch_size=None, num_workers=2, generator=0)
    draws = [tuple(x.tolist()) for x, _ in loader]
    assert draws[0] != draws[1]  # workers 0 and 1 seed their global RNGs differently


class CountingStream(fl.IterableDataset):
    """A stream that can say where it is and go back there."""

    def __init__(self, n: int = 20) -> None:
        self.n, self.position, self.resume_from = n, 0, 0

    def __iter__(self):
        self.position, self.resume_from = self.resume_from, 0
        while self.position < self.n:
            self.position += 1
            yield self.position - 1

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.resume_from = state["position"]


def test_iterable_dataset_with_its_own_state_is_restored_not_fast_forwarded() -> None:
    first = fl.DataLoader(CountingStream(), batch_size=3)
    iterator = iter(first)
    delivered = [next(iterator).tolist() for _ in range(2)]
    state = json.loads(json.dumps(first.state_dict()))
    assert state["dataset"] == {"position": 6}
    stream = CountingStream()
    resumed = fl.DataLoader(stream, batch_size=3)
    resumed.load_state_dict(state)
    rest = [b.tolist() for b in resumed]
    assert delivered + rest == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9, 10, 11],
        [12, 13, 14],
        [15, 16, 17],
        [18, 19],
    ]


@pytest.mark.parametrize(("workers", "persistent"), [(0, False), (2, False), (2, True)])
def test_a_checkpoint_after_breaking_out_of_the_loop_continues_where_it_stopped(
    workers, persistent
) -> None:
    """Step-based training: `for step, batch in enumerate(loader): ... if step == N: break`,
    then save. The epoch is not over for the checkpoint: resuming gives the rest of it."""

    def make() -> fl.DataLoader:
        return fl.DataLoader(
            Augmented(30),
            batch_size=4,
            shuffle=True,
            generator=5,
            num_workers=workers,
            persistent_workers=persistent,
        )

    reference = epochs(make(), 2)
    loader = make()
    delivered = []
    for step, batch in enumerate(loader):
        delivered.append(batch.tobytes())
        if step == 2:
            break
    state = json.loads(json.dumps(loader.state_dict()))
    assert (state["epoch"], state["batches_yielded"]) == (0, 3)
    del loader

    resumed = make()
    resumed.load_state_dict(state)
    assert delivered + epochs(resumed, 2) == reference
