"""Resampling audio to one rate, the same samples however a file is cut into windows.

Output sample ``n`` lies at source position ``n * rate_in / rate_out`` from the file's
first sample; it is a windowed-sinc (Kaiser) sum over the source samples within
``HALF_ZEROS`` zero crossings of the lower rate on each side. A window of output samples
therefore depends only on the source samples around it, and each is summed in one fixed
order: a window cut from anywhere equals the same samples of the whole file resampled, bit
for bit. (FFmpeg's swresample carries state from the first sample it is given, so a window
resampled after a seek differs from the whole file's.)
"""

from __future__ import annotations

from functools import lru_cache
from math import ceil, gcd

import numpy as np

HALF_ZEROS = 16  # zero crossings of the filter on each side, at the lower rate
_KAISER_BETA = 8.6  # stop band about 80 dB down


def taps_each_side(rate_in: int, rate_out: int) -> int:
    """How many source samples on each side of its position an output sample reads."""
    if rate_in == rate_out:
        return 0
    return ceil(HALF_ZEROS * max(1.0, rate_in / rate_out))


def source_span(rate_in: int, rate_out: int, first: int, count: int) -> tuple[int, int]:
    """The source samples ``[lo, hi)`` that output samples ``first .. first + count - 1``
    read."""
    half = taps_each_side(rate_in, rate_out)
    up, down = _ratio(rate_in, rate_out)
    lo = (first * down) // up - half + 1
    hi = ((first + count - 1) * down) // up + half + 1
    return (first, first + count) if half == 0 else (lo, hi)


def resample(
    source: np.ndarray, source_first: int, rate_in: int, rate_out: int, first: int, count: int
) -> np.ndarray:
    """Output samples ``first .. first + count - 1`` (float32, ``channels x count``) from
    ``source`` (``channels x m``, float32), which holds the source samples from
    ``source_first`` on and must cover ``source_span(...)``."""
    lo, hi = source_span(rate_in, rate_out, first, count)
    if lo < source_first or hi > source_first + source.shape[1]:
        raise ValueError(
            f"the source holds samples {source_first}..{source_first + source.shape[1]}, "
            f"output samples {first}..{first + count} need {lo}..{hi}"
        )
    if rate_in == rate_out:
        return np.ascontiguousarray(source[:, first - source_first : first - source_first + count])
    up, down = _ratio(rate_in, rate_out)
    bank = _filter_bank(rate_in, rate_out)
    half = bank.shape[1] // 2
    n = np.arange(first, first + count, dtype=np.int64)
    base = (n * down) // up  # the source sample at or before each output sample
    weights = bank[(n * down) % up]  # count x taps, by each output's phase
    start = base - half + 1 - source_first
    data = source.astype(np.float64, copy=False)
    out = np.zeros((source.shape[0], count), dtype=np.float64)
    for k in range(bank.shape[1]):  # one tap at a time: a fixed order for every sample
        out += data[:, start + k] * weights[:, k]
    return out.astype(np.float32)


def _ratio(rate_in: int, rate_out: int) -> tuple[int, int]:
    """(up, down): output sample n lies at source position n * down / up."""
    g = gcd(rate_in, rate_out)
    return rate_out // g, rate_in // g


@lru_cache(maxsize=8)
def _filter_bank(rate_in: int, rate_out: int) -> np.ndarray:
    """The filter's weights for each phase (``up x 2 * half``): row p is for an output
    sample lying p / up of a source sample past the source sample before it; each row sums
    to 1, so a constant stays constant."""
    up, _ = _ratio(rate_in, rate_out)
    half = taps_each_side(rate_in, rate_out)
    cutoff = min(1.0, rate_out / rate_in)  # of the source's Nyquist frequency
    phase = np.arange(up, dtype=np.float64)[:, None] / up
    distance = phase + (half - 1) - np.arange(2 * half, dtype=np.float64)[None, :]
    inside = np.clip(1 - (distance / half) ** 2, 0, None)
    weights = np.sinc(cutoff * distance) * np.i0(_KAISER_BETA * np.sqrt(inside))
    weights[np.abs(distance) >= half] = 0
    return weights / weights.sum(axis=1, keepdims=True)
