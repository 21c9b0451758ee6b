"""iterator.stats().write_trace(path): the loader's recent history as a Chrome trace, checked
against the Trace Event Format (what Perfetto and chrome://tracing read): its event shapes,
spans that nest on each track, a ring bounded in batches, every worker method, and the
tuner's changes as instant events."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import numpy as np
import pytest

import flowloader as fl
import flowloader.dataloader as dataloader_module

from .test_autotune import Scripted

EPSILON_US = 0.5  # a float64 holds microseconds since 1970 to a quarter of a microsecond


class Marked(fl.Dataset):
    """Item i, its transform marked as a stage (as the vision datasets mark theirs)."""

    def __len__(self) -> int:
        return 48

    def __getitem__(self, i: int) -> np.ndarray:
        time.sleep(0.0005)
        with fl.stats.stage("transform"):
            return np.full(16, i, dtype=np.float32) * 2


def check_format(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The Trace Event Format's rules for the kinds of event we write; the events."""
    assert set(trace) == {"traceEvents", "displayTimeUnit"}
    assert trace["displayTimeUnit"] in ("ms", "ns")
    events = trace["traceEvents"]
    assert isinstance(events, list)
    assert events
    for event in events:
        assert isinstance(event["name"], str)
        assert event["name"]
        assert isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        kind = event["ph"]
        if kind == "M":
            assert event["name"] in ("process_name", "thread_name")
            assert isinstance(event["args"]["name"], str)
            continue
        assert isinstance(event["ts"], (int, float))
        assert event["ts"] > 0
        assert isinstance(event.get("args", {}), dict)
        if kind == "X":
            assert isinstance(event["dur"], (int, float))
            assert event["dur"] >= 0
        else:
            assert kind == "i"
            assert event["s"] in ("g", "p", "t")
    return events


def check_nesting(events: list[dict[str, Any]]) -> None:
    """Complete events on one track either nest or follow each other: a viewer draws them as
    a stack and cannot show partial overlaps."""
    tracks = defaultdict(list)
    for event in events:
        if event["ph"] == "X":
            tracks[event["tid"]].append(event)
    for spans in tracks.values():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends: list[float] = []
        for span in spans:
            while open_ends and span["ts"] >= open_ends[-1] - EPSILON_US:
                open_ends.pop()
            end = span["ts"] + span["dur"]
            if open_ends:
                assert end <= open_ends[-1] + EPSILON_US, span
            open_ends.append(end)


def traced(loader: fl.DataLoader, path) -> tuple[list[dict[str, Any]], list[Any], float, float]:
    before = time.time() * 1e6
    iterator = iter(loader)
    batches = list(iterator)
    iterator.stats().write_trace(path)
    after = time.time() * 1e6
    events = check_format(json.loads(path.read_text()))
    check_nesting(events)
    return events, batches, before, after


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("workers", "method"), [(0, "multiprocessing"), (2, "multiprocessing"), (2, "thread")]
)
def test_a_trace_shows_each_batch_of_each_worker_and_the_loops_waits(
    tmp_path, workers, method
) -> None:
    loader = fl.DataLoader(Marked(), batch_size=4, num_workers=workers, worker_method=method)
    events, batches, before, after = traced(loader, tmp_path / "trace.json")
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    if workers:
        kind = "process" if method == "multiprocessing" else "thread"
        assert sorted(n for n in names.values() if "worker" in n) == [
            f"worker {w} ({kind})" for w in range(workers)
        ]
    else:
        assert "loading, in the loop" in names.values()
    spans = [e for e in events if e["ph"] == "X"]
    assert all(before - 1e3 <= e["ts"] and e["ts"] + e["dur"] <= after + 1e3 for e in spans)
    waits = [e["args"]["batch"] for e in spans if e["name"] == "wait for data"]
    assert waits == list(range(len(batches)))
    assert {names[e["tid"]] for e in spans if e["name"] == "wait for data"} == {"training loop"}
    per_stage = defaultdict(set)
    for span in spans:
        per_stage[span["name"].split(" (")[0]].add(span["args"]["batch"])
    every = set(range(len(batches)))
    for stage in ("fetch", "collate", "transform"):
        assert per_stage[stage] == every, stage
    assert {f"batch {b}" for b in every} <= {e["name"] for e in spans}
    if workers:
        assert per_stage["hand-over"] == every
    fetches = [e for e in spans if e["name"] == "fetch"]
    assert all(e["args"]["transform_ms"] > 0 for e in fetches)


@pytest.mark.timeout(60)
def test_the_ring_keeps_the_last_batches_only(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(fl.stats, "trace_batches", 5)
    loader = fl.DataLoader(Marked(), batch_size=2, num_workers=2)
    events, batches, _, _ = traced(loader, tmp_path / "trace.json")
    waits = [e["args"]["batch"] for e in events if e["name"] == "wait for data"]
    assert waits == list(range(len(batches) - 5, len(batches)))
    assert len([e for e in events if e["name"] == "fetch"]) == 5


def test_nothing_is_recorded_when_the_trace_is_off(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(fl.stats, "trace_batches", 0)
    iterator = iter(fl.DataLoader(Marked(), batch_size=4))
    list(iterator)
    assert iterator.stats().timeline is None
    with pytest.raises(RuntimeError, match="trace_batches is 0"):
        iterator.stats().write_trace(tmp_path / "trace.json")
    assert not (tmp_path / "trace.json").exists()


@pytest.mark.timeout(120)
def test_tuning_changes_are_instant_events_and_batches_keep_their_numbers(
    tmp_path, monkeypatch
) -> None:
    """Across changes of workers mid-epoch, batch numbers go on (they are the epoch's, not a
    part's), and each change is an instant event with its reason."""
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({3: 2, 7: 1}))
    loader = fl.DataLoader(Marked(), batch_size=4, num_workers="auto")
    events, batches, _, _ = traced(loader, tmp_path / "trace.json")
    instants = [e for e in events if e["ph"] == "i"]
    names = [e["name"] for e in instants]
    assert names == [f"num_workers={n} multiprocessing prefetch_factor=2" for n in (2, 1)]
    assert [e["args"]["reason"] for e in instants] == ["scripted at 3", "scripted at 7"]
    waits = [e["args"]["batch"] for e in events if e["name"] == "wait for data"]
    assert waits == list(range(len(batches)))
    fetched = sorted(e["args"]["batch"] for e in events if e["name"] == "fetch")
    assert set(fetched) == set(range(len(batches)))  # some twice: loaded before a change
