"""``flowloader bench`` claims a difference between two runs only beyond their noise: the
spread of each run's rate over equal parts of it (scripted records, no timing)."""

from __future__ import annotations

import pytest

from flowloader.cli.bench import PARTS, _auto_line, part_rates, spread


def test_a_run_s_rate_over_equal_parts_after_its_first_batch() -> None:
    # a batch of 10 samples every 0.1 s from 1.0 s in (the start-up before it left out),
    # then twice as fast over the last third
    marks = [(1.0 + 0.1 * k, 10 * (k + 1)) for k in range(21)]
    marks += [(3.0 + 0.05 * k, 220 + 10 * k) for k in range(1, 21)]
    rates = part_rates(marks)
    assert len(rates) == PARTS
    assert rates[0] == pytest.approx(100.0)
    assert rates[-1] == pytest.approx(200.0, rel=0.1)
    assert part_rates(marks[:3]) == []  # too few batches to tell
    assert part_rates([(1.0, 10)] * 5) == []  # no time between them


def record(rate: float, parts: list[float], **more) -> dict:
    return {"samples_per_s": rate, "part_samples_per_s": parts, **more}


def test_the_spread_is_the_parts_range_over_their_mean() -> None:
    assert spread(record(100, [90, 100, 110])) == pytest.approx(0.2)
    assert spread(record(100, [])) == 0.0
    assert spread({"samples_per_s": 1.0}) == 0.0


def test_auto_against_the_best_fixed_count_is_within_noise_unless_beyond_the_spread() -> None:
    chose = {"tuning": [{"num_workers": 2, "reason": "why"}], "num_workers": "auto"}
    fixed = [record(1000, [900, 1000, 1100]), record(600, [600, 600, 600])]
    same = _auto_line("mnist", record(1150, [1000, 1150, 1300], **chose), fixed)
    assert same == (
        "mnist: auto chose 2 workers (why); 1,150 samples/s, within noise of the best fixed "
        "count (1.15x; runs' parts spread 26%)"
    )
    faster = _auto_line("mnist", record(1530, [1500, 1530, 1560], **chose), fixed)
    assert (
        faster == "mnist: auto chose 2 workers (why); 1,530 samples/s, 1.53x the best fixed count"
    )
    unmeasured = _auto_line("mnist", record(1530, [], **chose), [record(1000, [])])
    assert unmeasured.endswith("within noise of the best fixed count (1.53x; no spread measured)")
