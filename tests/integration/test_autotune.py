"""num_workers="auto" end to end: workers added and removed mid-epoch (processes and threads,
with tasks in flight) never change a batch; a state saved after a change resumes exactly;
the real tuner stays in process for cheap loading and starts workers for heavy loading."""

from __future__ import annotations

import gc
import json
import threading
import time
from typing import Any

import numpy as np
import pytest

import flowloader as fl
import flowloader._iter.tuner_feed as tuner_feed_module
import flowloader.dataloader as dataloader_module
from flowloader._iter.gil import thread_times
from flowloader._iter.iterator import DataLoaderIterator
from flowloader._iter.tuning import IN_PROCESS_MEASURE_MAX, Change, Setting, WorkerTuner


@pytest.fixture(autouse=True)
def no_workers_after_a_failure(request: pytest.FixtureRequest):
    """A test that fails leaves no worker behind: its iterators (kept alive by the failure's
    traceback) are shut down, so that the leak guard reports the failure, not its workers.
    A test that passes is left to the guard as it is."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        for found in gc.get_objects():
            if isinstance(found, DataLoaderIterator):
                found.shutdown(grace_s=0.0)


class Slowish(fl.Dataset):
    """Item i: its number and a draw from its own generator (the same on any worker), after
    ``delay_s`` of sleep."""

    def __init__(self, n: int = 120, delay_s: float = 0.002) -> None:
        self.n, self.delay_s = n, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        time.sleep(self.delay_s)
        return np.array([i, fl.sample_rng().integers(0, 1000)])


class Scripted:
    """A tuner that changes the workers after the batches its script names (their kind and
    prefetch stay the loader's)."""

    chooses_method = False  # the loader's own worker_method: no GIL probe
    method = "multiprocessing"  # where worker_method is left to the tuner
    prefetch = 2
    probing = False
    unmeasured_between = 0  # every batch is told: the script counts them

    def __init__(self, script: dict[int, int | Setting]) -> None:
        self.script, self.seen, self.changes = script, 0, []
        self.num_workers = 0

    def __call__(self, *args: Any) -> Scripted:
        return self

    def observe(self, *measured: Any, batches: int = 1) -> Setting | None:
        self.seen += 1
        found = self.script.get(self.seen)
        if found is None:
            return None
        setting = found if isinstance(found, Setting) else Setting(found)
        self.changes.append(Change(0.0, setting.num_workers, f"scripted at {self.seen}", {}))
        self.num_workers = setting.num_workers
        return setting

    def workers_start(self) -> None:
        """A new epoch's workers: the script counts batches across epochs."""

    def limit(self, max_workers: int) -> Setting | None:
        return None  # the script decides (the default memory_budget never binds here)

    def as_records(self) -> list[dict]:
        return [vars(c) for c in self.changes]


def reference(ds: fl.Dataset, **options) -> list[list[int]]:
    return [b.tolist() for b in fl.DataLoader(ds, batch_size=4, **options)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["multiprocessing", "thread"])
def test_changes_mid_epoch_keep_every_batch(monkeypatch, method) -> None:
    """In process, then 2, 3, 1, 0 and 2 workers within one epoch, shuffled, each change while
    the workers have batches in flight: the batches are num_workers=0's."""
    ds = Slowish()
    expected = reference(ds, shuffle=True, generator=3)
    tuner = Scripted({3: 2, 8: 3, 12: 1, 17: 0, 21: 2})
    monkeypatch.setattr(dataloader_module, "WorkerTuner", tuner)
    loader = fl.DataLoader(
        ds, batch_size=4, shuffle=True, generator=3, num_workers="auto", worker_method=method
    )
    iterator = iter(loader)
    workers_seen = []
    got = []
    for batch in iterator:
        got.append(batch.tolist())
        workers_seen.append(iterator.stats().num_workers)
    assert got == expected
    assert {0, 1, 2, 3} <= set(workers_seen)
    stats = iterator.stats()
    assert stats.batches == len(expected)
    assert [c["num_workers"] for c in stats.tuning] == [2, 3, 1, 0, 2]


@pytest.mark.timeout(120)
def test_a_state_saved_after_a_change_resumes_exactly(monkeypatch) -> None:
    ds = Slowish(n=80)
    expected = reference(ds, shuffle=True, generator=5)
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({2: 2, 6: 1}))
    loader = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=5, num_workers="auto")
    got = []
    for batch in loader:
        got.append(batch.tolist())
        if len(got) == 9:  # after both changes
            break
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["batches_yielded"] == 9
    for workers in (0, 2):
        again = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=5, num_workers=workers)
        again.load_state_dict(state)
        assert got + [b.tolist() for b in again] == expected


@pytest.mark.timeout(120)
def test_persistent_workers_keep_the_tuned_count_across_epochs(monkeypatch) -> None:
    ds = Slowish(n=40)
    plain = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=1)
    expected = [[b.tolist() for b in plain] for _ in range(2)]
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({2: 2}))
    loader = fl.DataLoader(
        ds, batch_size=4, shuffle=True, generator=1, num_workers="auto", persistent_workers=True
    )
    first = [b.tolist() for b in loader]
    iterator = loader._iterator
    second = [b.tolist() for b in loader]
    assert loader._iterator is iterator
    assert iterator.stats().num_workers == 2  # the second epoch began on 2 workers
    assert [first, second] == expected


@pytest.mark.timeout(120)
def test_each_epoch_starts_on_the_count_reached(monkeypatch) -> None:
    """The tuner is the loader's: a new epoch (new workers) starts on the count the last
    one reached, without probing again."""
    ds = Slowish(n=40)
    plain = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=2)
    expected = [[b.tolist() for b in plain] for _ in range(2)]
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({2: 3}))
    loader = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=2, num_workers="auto")
    first = [b.tolist() for b in loader]
    iterator = iter(loader)
    assert iterator.stats().num_workers == 3
    second = [b.tolist() for b in iterator]
    assert [first, second] == expected


@pytest.mark.timeout(120)
def test_the_tuner_stays_in_process_for_cheap_loading_and_starts_workers_for_heavy(
    monkeypatch,
) -> None:
    told: list[int] = []  # the batches the tuner was told of, so far, after each call
    observe = WorkerTuner.observe

    def counting(self: WorkerTuner, *measured: Any, batches: int = 1, **more: Any) -> Any:
        told.append((told[-1] if told else 0) + batches)
        return observe(self, *measured, batches=batches, **more)

    monkeypatch.setattr(WorkerTuner, "observe", counting)
    cheap = fl.DataLoader(np.arange(4000), batch_size=8, num_workers="auto")
    iterator = iter(cheap)
    assert [int(b[0]) for b in iterator] == list(range(0, 4000, 8))
    tuning = iterator.stats().tuning
    assert tuning[0]["num_workers"] == 0
    assert "in this process" in tuning[0]["reason"]
    assert told[-1] >= 500 - (IN_PROCESS_MEASURE_MAX + 1)  # each told batch stands for more
    assert len(told) < 500 / 4  # ... so a few are measured: the tuner's cost per batch

    heavy = Slowish(n=200, delay_s=0.004)
    loader = fl.DataLoader(heavy, batch_size=4, num_workers="auto")
    iterator = iter(loader)
    got = [b[:, 0].tolist() for b in iterator]
    assert got == [list(range(i, i + 4)) for i in range(0, 200, 4)]
    tuning = iterator.stats().tuning
    assert tuning[0]["num_workers"] >= 1
    assert "workers give" in tuning[0]["reason"]


class ScriptedGil:
    """A GIL sampler whose share is scripted: what the loading holds is the test's to say,
    not the machine's (a busy machine reads the real one later, or differently). It is
    wanted until one batch is sampled, as the real one is for a batch this long."""

    def __init__(self, held: float) -> None:
        self.held, self.sampled = held, 0
        self.wanted = True

    def __call__(self) -> ScriptedGil:
        return self

    def sample(self, on: bool, after_s: float = 0.0) -> None:
        if not on:
            self.sampled += 1
            self.wanted = False

    def held_fraction(self) -> float | None:
        return self.held if self.sampled else None

    def stop(self) -> None:
        self.wanted = False


@pytest.mark.timeout(120)
def test_a_first_batch_worth_workers_decides_and_workers_load_the_second(monkeypatch) -> None:
    """The probe needs one batch when that batch shows loading worth workers (it sleeps 60
    ms, at least that on any machine): told when the loop comes back, with the GIL sampled
    over it (scripted: 10% held, so threads), and the second batch is the workers'. A state
    saved after the change resumes exactly."""
    gil = ScriptedGil(held=0.1)
    monkeypatch.setattr(tuner_feed_module, "GilSampler", gil)
    ds = Slowish(n=80, delay_s=0.015)
    expected = reference(ds, shuffle=True, generator=6)
    loader = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=6, num_workers="auto")
    iterator = iter(loader)
    got, workers = [], []
    try:
        for batch in iterator:
            got.append(batch.tolist())
            workers.append(iterator.stats().num_workers)
            if len(got) == 3:
                break
        probe = iterator.stats().tuning[0]
        state = json.loads(json.dumps(loader.state_dict()))
    finally:  # a failure leaves no worker behind
        iterator.shutdown()
    assert gil.sampled == 1
    assert probe["measured"]["batches"] == 1, probe
    assert probe["measured"]["gil_held"] == 0.1, probe
    assert probe["num_workers"] >= 1, probe
    assert probe["worker_method"] == "thread", probe
    assert workers == [0, probe["num_workers"], probe["num_workers"]]
    again = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=6)
    again.load_state_dict(state)
    assert got + [b.tolist() for b in again] == expected


class LargeItems(Slowish):
    """Items of 2.25 MiB: batches of 16 are 36 MiB, as large as an ImageNet one."""

    def __getitem__(self, i: int) -> np.ndarray:
        time.sleep(self.delay_s)
        return np.full((768, 768), i, dtype=np.float32)


@pytest.mark.timeout(120)
def test_large_batches_start_at_prefetch_1() -> None:
    """Each large batch more in flight is a fresh buffer to fault in: the probe measures the
    first batch's size and starts the workers one batch ahead each."""
    ds = LargeItems(n=96, delay_s=0.002)
    loader = fl.DataLoader(ds, batch_size=16, num_workers="auto", worker_method="thread")
    iterator = iter(loader)
    firsts = [int(batch[:, 0, 0].max()) for batch in iterator]
    assert firsts == list(range(15, 96, 16))
    probe = iterator.stats().tuning[0]
    assert probe["num_workers"] >= 1, probe
    assert probe["prefetch_factor"] == 1, probe
    assert "prefetch 1 (batches of 36.0 MiB)" in probe["reason"]


def test_auto_is_refused_where_it_cannot_work() -> None:
    class Stream(fl.IterableDataset):
        def __iter__(self):
            return iter(range(10))

    with pytest.raises(ValueError, match="num_workers='auto' needs a map-style dataset"):
        fl.DataLoader(Stream(), num_workers="auto")
    with pytest.raises(TypeError, match="num_workers should be an int or 'auto'"):
        fl.DataLoader(np.arange(4), num_workers="many")
    assert fl.DataLoader(np.arange(4), num_workers="auto").num_workers == "auto"


class RandomTuner(Scripted):
    """A tuner that changes to a random count (0-3) after random batches."""

    def __init__(self, seed: int) -> None:
        draw = np.random.default_rng(seed)
        super().__init__({int(k): int(draw.integers(0, 4)) for k in draw.integers(1, 30, 4)})


def resume_points_while_tuning(monkeypatch, count: int) -> None:
    """``count`` random cuts of two epochs read by an "auto" loader whose tuner changes the
    workers at random batches (processes one time in five, else threads); resumed on a
    random fixed count or on "auto" again: the batches are those of one num_workers=0 run,
    every sample once per epoch."""
    ds = Slowish(n=60, delay_s=0.0005)
    plain = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=9)
    full = [b.tolist() for _ in range(2) for b in plain]
    draw = np.random.default_rng(20261204)
    for point in range(count):
        monkeypatch.setattr(dataloader_module, "WorkerTuner", RandomTuner(point))
        method = "multiprocessing" if point % 5 == 0 else "thread"
        first = fl.DataLoader(
            ds, batch_size=4, shuffle=True, generator=9, num_workers="auto", worker_method=method
        )
        cut = int(draw.integers(1, len(full)))
        got: list = []
        while len(got) < cut:
            for batch in first:
                got.append(batch.tolist())
                if len(got) == cut:
                    break
        state = json.loads(json.dumps(first.state_dict()))
        workers = ["auto", 0, 2][int(draw.integers(0, 3))]
        monkeypatch.setattr(dataloader_module, "WorkerTuner", RandomTuner(point + 1000))
        second = fl.DataLoader(ds, batch_size=4, shuffle=True, generator=9, num_workers=workers)
        second.load_state_dict(state)
        while len(got) < len(full):
            got += [b.tolist() for b in second]
        assert got == full, f"cut at batch {cut} of {len(full)}, resumed on {workers}"


@pytest.mark.timeout(300)
def test_random_resume_points_while_the_tuner_changes_workers(monkeypatch) -> None:
    resume_points_while_tuning(monkeypatch, 10)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_hundred_random_resume_points_while_the_tuner_changes_workers(monkeypatch) -> None:
    resume_points_while_tuning(monkeypatch, 100)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", ["multiprocessing", "thread"])
def test_prefetch_changes_mid_epoch_keep_every_batch(monkeypatch, method) -> None:
    """Deeper and shallower prefetch with workers running: only what is kept in flight
    changes."""
    ds = Slowish(n=160)
    expected = reference(ds, shuffle=True, generator=4)
    script = {2: 2, 5: Setting(2, None, 4), 14: Setting(2, None, 1), 25: Setting(3, None, 2)}
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted(script))
    loader = fl.DataLoader(
        ds, batch_size=4, shuffle=True, generator=4, num_workers="auto", worker_method=method
    )
    iterator = iter(loader)
    got, in_flight = [], []
    for batch in iterator:
        got.append(batch.tolist())
        in_flight.append(iterator.stats().in_flight)
    assert got == expected
    assert max(in_flight[6:14]) <= 8
    assert max(in_flight[21:25]) <= 2  # one each, once the 8 sent before have drained


class GilFree(Slowish):
    """Loading that sleeps (lets go of the GIL)."""


class GilBound(Slowish):
    """Loading that runs Python for its whole time."""

    def __getitem__(self, i: int) -> np.ndarray:
        end = time.perf_counter() + self.delay_s
        while time.perf_counter() < end:
            pass
        return np.array([i, fl.sample_rng().integers(0, 1000)])


def skip_on_a_busy_machine() -> None:
    """Skip where this thread, running 0.1 s of Python, waits for a CPU a fifth of the time
    or more: the GIL's share cannot be observed there (test_gil.py tests its arithmetic)."""
    _, queued = thread_times()
    started = time.perf_counter()
    while time.perf_counter() - started < 0.1:
        pass
    waited = thread_times()[1] - queued
    if waited > 0.2 * (time.perf_counter() - started):
        pytest.skip(f"the machine kept a thread waiting for a CPU {waited * 1000:.0f} ms of 100")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("kind", "chosen"), [(GilFree, "thread"), (GilBound, "multiprocessing")])
def test_the_tuner_measures_the_gil_to_choose_threads_or_processes(kind, chosen) -> None:
    """The probe's choice, from the GIL's share it measured (what follows may revisit it)."""
    skip_on_a_busy_machine()
    ds = kind(n=96, delay_s=0.004)
    loader = fl.DataLoader(ds, batch_size=4, num_workers="auto", generator=7)
    assert loader.worker_method == "auto"
    iterator = iter(loader)
    got = [batch.tolist() for batch in iterator]
    assert got == reference(ds, generator=7)
    stats = iterator.stats()
    probe = stats.tuning[0]
    held = probe["measured"]["gil_held"]
    if (held < 0.5) != (chosen == "thread"):  # the machine starved the sampler meanwhile
        pytest.skip(f"a busy machine misled the GIL sampler ({held:.2f} held)")
    assert probe["num_workers"] >= 1, stats.tuning
    assert probe["worker_method"] == chosen, stats.tuning
    assert not any(t.name == "flowloader-gil-sampler" for t in threading.enumerate())


def test_worker_method_and_prefetch_are_the_tuners_unless_given() -> None:
    ds = np.arange(8)
    auto = fl.DataLoader(ds, num_workers="auto")
    assert (auto.worker_method, auto.prefetch_factor) == ("auto", "auto")
    given = fl.DataLoader(ds, num_workers="auto", worker_method="thread", prefetch_factor=3)
    assert (given.worker_method, given.prefetch_factor) == ("thread", 3)
    assert given._worker_tuner().methods == ("thread",)
    assert not given._worker_tuner().tune_prefetch
    with_context = fl.DataLoader(ds, num_workers="auto", multiprocessing_context="spawn")
    assert with_context.worker_method == "multiprocessing"
    assert fl.DataLoader(ds, num_workers=2).worker_method == "multiprocessing"
    for name in ("worker_method", "prefetch_factor"):
        with pytest.raises(ValueError, match=f"{name}='auto' needs num_workers='auto'"):
            fl.DataLoader(ds, num_workers=2, **{name: "auto"})


@pytest.mark.timeout(60)
def test_a_shut_down_iterator_starts_no_workers_for_the_probe_s_decision() -> None:
    ds = Slowish(n=40, delay_s=0.015)  # the first batch asks for workers
    iterator = iter(fl.DataLoader(ds, batch_size=4, num_workers="auto"))
    next(iterator)
    iterator.shutdown()
    with pytest.raises(StopIteration):
        next(iterator)
    assert iterator.stats().num_workers == 0
    assert not any(t.name.startswith("flowloader-worker") for t in threading.enumerate())
