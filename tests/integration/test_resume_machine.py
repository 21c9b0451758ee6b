"""The order promise as a state machine over what a user can do (hypothesis stateful).

Rules: take k batches (a new epoch where none is in flight), break out of the loop,
``state_dict()`` at any moment (before ``iter``, mid-epoch, at the last batch, after
``StopIteration``, after a break, between epochs), the training loop's own
``sampler.set_epoch``, and a new job: a fresh loader resuming the last checkpoint, with any
of the configuration changed: workers (0, 2, ``"auto"`` with a scripted tuner), threads or
processes, persistent workers, the Mixture (made longer, a new stage, reweighted), the
sampler, the batch size, and the world size of a DistributedSampler (1, 2 or 3 ranks, every
rank loading rank 0's state, as torchrun jobs do). Data may hold a run of samples that fail
(``skip_errors``).

The oracle is a reference run of the current configuration, in process, without breaks.
Invariants: every batch a rank delivers is the next of its epoch in the reference (its
samples, where the grouping changed), an epoch that ends has delivered all of its epoch's,
the loader's epoch is the one the model expects, and a state names that epoch; a resume is
accepted or refused with a ValueError, and refused only where something read would differ
(a change of workers, worker method, persistence or batch size is always accepted; a
sampler setting changed before anything of the epoch is read is accepted). Once a sampler
changed, epochs compare as multisets of samples: the shared generator was drawn by the old
sampler, so the orders are those of another run. An epoch read on more than one world size
is checked across its ranks and jobs: every sample of it delivered, none twice beyond the
padding each world's pass may add (fewer than its number of ranks).

The fast part runs 150 machines of up to 30 steps; ``-m slow`` runs 10,000.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import flowloader.dataloader as dataloader_module
from tests.integration.test_autotune import Scripted
from tests.integration.test_resume_chains import EPOCHS, Config, changed, configs, key

# Samplers that read one rank's order of any dataset and take a new batch size or a change of
# kind between them (single rank: epochs read before a change compare as sets of samples).
SWAPPABLE = ("sequential", "shuffled", "block_shuffled")
_REFERENCES: dict[tuple[Config, int], list[list[list[Any]]]] = {}


def reference(config: Config, rank: int) -> list[list[list[Any]]]:
    """Each epoch's batches of one uninterrupted run of ``config``, in process."""
    plain = replace(config, workers=0, persistent=False, worker_method="thread")
    found = _REFERENCES.get((plain, rank))
    if found is None:
        loader = plain.loader(rank)
        found = [[[key(item) for item in batch] for batch in loader] for _ in range(EPOCHS)]
        if len(_REFERENCES) > 2000:
            _REFERENCES.clear()
        _REFERENCES[(plain, rank)] = found
    return found


def samples(batches: list[list[Any]]) -> list[Any]:
    return [item for batch in batches for item in batch]


class Job:
    """One training job: its configuration and a loader per rank."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.loaders = [config.loader(rank) for rank in config.ranks]
        if config.workers == "auto":  # a tuner of its own per loader, scripted
            for loader in self.loaders:
                dataloader_module.WorkerTuner = lambda *_: Scripted(dict(SCRIPT))  # type: ignore[misc,assignment]
                try:
                    loader._worker_tuner()
                finally:
                    dataloader_module.WorkerTuner = ORIGINAL_TUNER  # type: ignore[misc]
        self.iterators: list[Any] = [None for _ in config.ranks]

    def stop(self) -> None:
        """Stop every worker this job started (persistent ones included), as a job that
        ends does."""
        for loader in self.loaders:
            for iterator in (loader._iterator, *self.iterators):
                if iterator is not None:
                    iterator.shutdown()


# num_workers="auto": the workers change after these batches (counted across epochs).
SCRIPT = {3: 2, 6: 1, 9: 0, 12: 2}


ORIGINAL_TUNER = dataloader_module.WorkerTuner


@dataclass
class Rank:
    """The model of one rank's loop: its epochs' batches, the epoch in flight, what a state
    it saves must say. Ranks go on independently: with skip_errors one may have fewer
    batches in an epoch than another (batches whose samples all failed are dropped)."""

    delivered: list[list[list[Any]]] = field(default_factory=lambda: [[] for _ in range(EPOCHS)])
    next_epoch: int = 0  # the epoch the next iter() starts (a pending resume's)
    current: int | None = None  # the epoch of the iterator in flight, or of the last
    live: bool = False  # an iterator in flight
    ended: bool = True  # no epoch begun, or the last one ran to StopIteration
    pending: bool = False  # a resumed state waits for the next iter()
    finished: set[int] = field(default_factory=set)  # epochs that ran to StopIteration

    def state_epoch(self) -> int:
        """The epoch a state saved now names: the one in flight or broken off, else the
        next."""
        if self.pending or self.current is None or self.ended:
            return self.next_epoch
        return self.current


class ResumeMachine(RuleBasedStateMachine):
    """Per rank, the model above; the job (its configuration, a loader per rank); the last
    checkpoint (the states and the model as it was then)."""

    @initialize(config=configs(), flaky=st.booleans(), auto=st.integers(0, 5))
    def start(self, config: Config, flaky: bool, auto: int) -> None:
        config = replace(config, flaky=flaky, workers="auto" if auto == 0 else config.workers)
        try:
            self.job = Job(config)
        except ValueError:  # a Mixture this draw cannot make
            assume(False)
        self.ranks = [Rank() for _ in config.ranks]
        self.saved: dict[str, Any] | None = None
        self.sets_only_before = 0  # epochs before this one compare as multisets of samples
        self.regrouped = False  # a batch size changed: compare samples, not batches
        # Epochs read on more than one world size: everything their ranks delivered, over
        # every job, and how many samples may come twice (each world's padding).
        self.mixed: dict[int, Counter] = {}
        self.padding: dict[int, int] = {}

    # -- what a user does ------------------------------------------------------------------

    @rule(k=st.integers(1, 6))
    def take(self, k: int) -> None:
        """Each rank's loop takes up to ``k`` batches (a new epoch where none is in
        flight)."""
        for number, rank in enumerate(self.ranks):
            if not rank.live:
                if rank.next_epoch >= EPOCHS:
                    continue
                self._begin_epoch(number, rank)
            for _ in range(k):
                try:
                    batch = next(self.job.iterators[number])
                except StopIteration:
                    rank.live, rank.ended = False, True
                    self.job.iterators[number] = None
                    self._check_epoch_complete(number, rank)
                    break
                assert rank.current is not None
                keys = [key(item) for item in batch]
                rank.delivered[rank.current].append(keys)
                if rank.current in self.mixed:
                    self._check_mixed(rank.current, keys)
                else:
                    self._check_prefix(number, rank.current)

    @precondition(lambda self: any(rank.live for rank in self.ranks))
    @rule()
    def break_out(self) -> None:
        """The loop breaks: the iterators are dropped mid-epoch (their position stays)."""
        self.job.iterators = [None for _ in self.ranks]
        for rank in self.ranks:
            rank.live = False

    @rule()
    def checkpoint(self) -> None:
        states = [json.loads(json.dumps(loader.state_dict())) for loader in self.job.loaders]
        expected = [rank.state_epoch() for rank in self.ranks]
        assert [state["epoch"] for state in states] == expected, states
        self.saved = {
            "states": states,
            "config": self.job.config,
            "ranks": copy.deepcopy(self.ranks),
            "read_in_epoch": [
                len(samples(rank.delivered[e])) if e < EPOCHS else 0
                for rank, e in zip(self.ranks, expected, strict=True)
            ],
            "sets_only_before": self.sets_only_before,
            "regrouped": self.regrouped,
            "mixed": copy.deepcopy(self.mixed),
            "padding": dict(self.padding),
        }

    @precondition(lambda self: not any(rank.live for rank in self.ranks))
    @rule()
    def loop_sets_the_epoch(self) -> None:
        """PyTorch's loop: ``sampler.set_epoch(epoch)`` before each epoch; the loader takes
        the same number it would have chosen, so nothing changes."""
        for loader, rank in zip(self.job.loaders, self.ranks, strict=True):
            set_epoch = getattr(loader.sampler, "set_epoch", None)
            if callable(set_epoch) and rank.next_epoch < EPOCHS:
                set_epoch(rank.next_epoch)

    @precondition(lambda self: self.saved is not None)
    @rule(data=st.data())
    def new_job(self, data: st.DataObject) -> None:
        """A new job resumes the last checkpoint, with its configuration possibly changed."""
        saved = self.saved
        assert saved is not None
        old = saved["config"]
        config, how = self._changed(data, old)
        try:
            candidate = Job(config)
        except ValueError:  # a Mixture this change cannot make
            return
        self.job.stop()
        refusals = []
        states = saved["states"]
        if how == "world":  # every rank of the new world loads rank 0's state
            states = [states[0] for _ in config.ranks]
        for loader, state in zip(candidate.loaders, states, strict=True):
            try:
                loader.load_state_dict(state)
            except ValueError as refusal:
                refusals.append(str(refusal))
        if refusals:
            # ranks saved in the same epoch agree (with skip_errors one rank may be an epoch
            # ahead, and a state between epochs is checked against everything read)
            epochs = {state["epoch"] for state in saved["states"]}
            if len(epochs) == 1:
                assert len(refusals) == len(saved["states"]), f"ranks disagree: {refusals}"
            self._check_refusal_needed(how, config, refusals[0])
            candidate = Job(old)  # the user goes back to what was saved: accepted
            for loader, state in zip(candidate.loaders, saved["states"], strict=True):
                loader.load_state_dict(state)
            config = old
        self.sets_only_before = saved["sets_only_before"]
        if how == "sampler" and config is not old:
            # epochs read before: under the old sampler; later ones: the shared generator
            # was drawn by the old sampler before, so their orders are another uninterrupted
            # run's. Each epoch still delivers every sample once.
            self.sets_only_before = EPOCHS
        self.regrouped = saved["regrouped"] or (how == "batch_size" and config is not old)
        self.job = candidate
        self.mixed, self.padding = copy.deepcopy(saved["mixed"]), dict(saved["padding"])
        self.ranks = copy.deepcopy(saved["ranks"])
        if how == "world" and config is not old:
            self._move_to_world(old, config)
        for number, rank in enumerate(self.ranks):
            rank.next_epoch, rank.current = rank.state_epoch(), None
            rank.live, rank.ended, rank.pending = False, True, True
            for epoch in range(min(rank.next_epoch + 1, EPOCHS)):
                self._check_prefix(number, epoch)

    # -- the model's rules -------------------------------------------------------------------

    def _begin_epoch(self, number: int, rank: Rank) -> None:
        epoch = rank.next_epoch
        iterator = self.job.iterators[number] = iter(self.job.loaders[number])
        assert iterator.position.epoch == epoch, (iterator.position.epoch, epoch)
        if not rank.pending:  # a fresh pass over the epoch (a resume continues its part)
            rank.delivered[epoch] = []
        rank.pending = False
        rank.current, rank.next_epoch = epoch, epoch + 1
        rank.live, rank.ended = True, False

    def _changed(self, data: st.DataObject, config: Config) -> tuple[Config, str]:
        """The next job's configuration, and what kind of change it is."""
        how = data.draw(
            st.sampled_from(["workers", "workers", "mixture", "sampler", "batch", "world"])
        )
        workers = data.draw(st.sampled_from([0, 2, "auto"]))
        # mostly threads (fast to start); processes take the same tasks through a pipe
        method = data.draw(st.sampled_from(["thread"] * 4 + ["multiprocessing"]))
        persistent = data.draw(st.booleans())
        config = replace(config, workers=workers, worker_method=method, persistent=persistent)
        if how == "mixture":
            return data.draw(changed(config)), "mixture"
        if how == "sampler" and config.sampler in SWAPPABLE:
            return replace(config, sampler=data.draw(st.sampled_from(SWAPPABLE))), "sampler"
        if how == "batch" and not config.sampler.startswith("mixture_batches"):
            return replace(config, batch_size=data.draw(st.integers(1, 5))), "batch_size"
        if how == "world" and self._may_change_world(config):
            world = data.draw(st.sampled_from([w for w in (1, 2, 3) if w != config.world]))
            return replace(config, world=world), "world"
        return config, "workers"

    def _may_change_world(self, config: Config) -> bool:
        """DistributedSampler deals what is left out to another world; its ranks saved in
        step (without skip_errors, where a rank whose batches all failed reads ahead)."""
        saved = self.saved
        assert saved is not None
        epochs = {rank.state_epoch() for rank in saved["ranks"]}
        read = {len(samples(r.delivered[e])) for r in saved["ranks"] for e in epochs if e < EPOCHS}
        return (
            config.sampler.startswith("distributed")
            and not config.flaky
            and len(epochs) == 1
            and len(read) <= 1
        )

    def _move_to_world(self, old: Config, config: Config) -> None:
        """The model of a job on another world size: new ranks that start where rank 0's
        state points; the epoch it points into, if anything of it was read, is checked across
        worlds from now on."""
        saved = self.saved
        assert saved is not None
        epoch = saved["ranks"][0].state_epoch()
        if epoch < EPOCHS:
            read = Counter(s for r in saved["ranks"] for s in samples(r.delivered[epoch]))
            if epoch not in self.mixed and read:
                everything = [s for r in old.ranks for s in samples(reference(old, r)[epoch])]
                self.mixed[epoch] = read
                self.padding[epoch] = len(everything) - len(set(everything))
            if epoch in self.mixed:
                self.padding[epoch] += len(config.ranks) - 1
        finished = {e for e in range(EPOCHS) if e < epoch}
        self.ranks = [
            Rank(next_epoch=epoch, pending=True, finished=set(finished)) for _ in config.ranks
        ]

    def _check_refusal_needed(self, how: str, config: Config, refusal: str) -> None:
        saved = self.saved
        assert saved is not None
        assert "does not fit" in refusal, refusal
        assert how not in ("workers", "batch_size", "world"), (
            f"a {how} change was refused: {refusal}"
        )
        if how == "sampler":
            assert any(saved["read_in_epoch"]), f"refused before anything was read: {refusal}"
        if how == "mixture" and config.reads_in_sequence and not saved["regrouped"]:
            # it must differ in what was read: a batch, a short last one included
            assert any(
                self._differs(number, config, rank.delivered)
                for number, rank in enumerate(saved["ranks"])
            ), f"refused a resume that changed nothing already read: {refusal}"

    def _differs(self, number: int, config: Config, delivered: list[list[list[Any]]]) -> bool:
        """Whether a batch delivered is not the reference's (a short last batch that would
        now be longer is another batch)."""
        expected = reference(config, number)
        return any(delivered[e] != expected[e][: len(delivered[e])] for e in range(EPOCHS))

    def _epoch_samples(self, epoch: int) -> set[Any]:
        config = self.job.config
        return {s for r in config.ranks for s in samples(reference(config, r)[epoch])}

    def _check_mixed(self, epoch: int, keys: list[Any]) -> None:
        """An epoch read on more than one world size: each sample is the epoch's, and none
        comes twice beyond the padding its worlds may add."""
        delivered = self.mixed[epoch]
        delivered.update(keys)
        assert set(keys) <= self._epoch_samples(epoch), (epoch, keys)
        twice = sum(count - 1 for count in delivered.values())
        assert twice <= self.padding[epoch], (epoch, twice, self.padding[epoch], delivered)

    def _check_prefix(self, number: int, epoch: int) -> None:
        """What rank ``number`` delivered of ``epoch`` is the start of the reference's."""
        if epoch in self.mixed:
            return  # checked across ranks and worlds (_check_mixed)
        got = self.ranks[number].delivered[epoch]
        expected = reference(self.job.config, number)[epoch]
        if epoch < self.sets_only_before:  # read under another sampler (or broken off)
            assert not Counter(map(repr, samples(got))) - Counter(map(repr, samples(expected)))
            return
        if self.regrouped:
            assert samples(got) == samples(expected)[: len(samples(got))], (number, epoch)
        else:
            assert got == expected[: len(got)], (number, epoch, got, expected)

    def _check_epoch_complete(self, number: int, rank: Rank) -> None:
        """An epoch that ran to StopIteration delivered all of the reference's epoch."""
        epoch = rank.current
        assert epoch is not None
        rank.finished.add(epoch)
        if epoch in self.mixed:  # every rank of this world done: all of the epoch delivered
            if all(epoch in r.finished for r in self.ranks):
                assert set(self.mixed[epoch]) == self._epoch_samples(epoch), epoch
            return
        expected = reference(self.job.config, number)[epoch]
        got = rank.delivered[epoch]
        assert len(samples(got)) == len(samples(expected)), (number, epoch, got, expected)

    @invariant()
    def no_tuner_left_patched(self) -> None:
        assert dataloader_module.WorkerTuner is ORIGINAL_TUNER

    def teardown(self) -> None:
        if getattr(self, "job", None) is not None:
            self.job.stop()


MACHINE_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": True,
    "stateful_step_count": 30,
}


@pytest.mark.timeout(300)
@pytest.mark.filterwarnings("ignore::flowloader.errors.SkippedSampleWarning")
def test_resume_machines() -> None:
    ResumeMachine.TestCase.settings = settings(max_examples=150, **MACHINE_SETTINGS)
    ResumeMachine.TestCase().runTest()


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.filterwarnings("ignore::flowloader.errors.SkippedSampleWarning")
def test_resume_machines_at_length() -> None:
    ResumeMachine.TestCase.settings = settings(max_examples=10_000, **MACHINE_SETTINGS)
    ResumeMachine.TestCase().runTest()
