"""The keyed permutation (issue 37): how many orders a small source gets, how uniform its first
element is, and what a position costs (native kernel, NumPy path, and a Mixture's locate_many
at 1,000 sources, which uses it).

    python -m benchmarks.permutation [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from .common import environment, write_json

PASSES = 1000
FIRST_ELEMENT_PASSES = 20_000
BATCH = 256


def orders(n: int, passes: int) -> int:
    """Distinct orders among ``passes`` passes over ``range(n)`` of one source."""
    from flowloader.permutation import name_hash, pass_keys, permute

    keys = pass_keys(5, np.full(passes, name_hash("web"), np.uint64), np.arange(passes))
    return len({tuple(permute(np.arange(n), np.full(n, n), np.full(n, k)).tolist()) for k in keys})


def first_element_chi2(n: int, passes: int) -> tuple[float, int]:
    """Chi-square of the first element over ``passes`` passes (and its degrees of freedom)."""
    from flowloader.permutation import name_hash, pass_keys, permute

    keys = pass_keys(11, np.full(passes, name_hash("code"), np.uint64), np.arange(passes))
    first = permute(np.zeros(passes, np.int64), np.full(passes, n), keys)
    observed = np.bincount(first, minlength=n)
    expected = passes / n
    return float(((observed - expected) ** 2 / expected).sum()), n - 1


def permute_cost(native: bool, repeats: int) -> dict[str, float]:
    """Microseconds per position: batches of 256 over sources of 10^4-10^7, and one call."""
    from flowloader.permutation import permute

    previous = os.environ.get("FLOWLOADER_NATIVE")
    os.environ["FLOWLOADER_NATIVE"] = "1" if native else "0"
    try:
        rng = np.random.default_rng(0)
        sizes = rng.integers(10**4, 10**7, 1000)
        n = sizes[rng.integers(0, 1000, BATCH * repeats)]
        j = rng.integers(0, n)
        keys = rng.integers(0, 2**63, len(n)).astype(np.uint64)
        start = time.perf_counter()
        for b in range(repeats):
            at = slice(b * BATCH, (b + 1) * BATCH)
            permute(j[at], n[at], keys[at])
        batches = (time.perf_counter() - start) / (BATCH * repeats) * 1e6
        start = time.perf_counter()
        permute(j, n, keys)
        bulk = (time.perf_counter() - start) / len(n) * 1e6
    finally:
        if previous is None:
            del os.environ["FLOWLOADER_NATIVE"]
        else:
            os.environ["FLOWLOADER_NATIVE"] = previous
    return {"batches_us": batches, "one_call_us": bulk}


def run(quick: bool = False) -> dict[str, Any]:
    from flowloader.permutation import native_available

    from . import mixtures

    repeats = 40 if quick else 400
    record: dict[str, Any] = {
        "orders": {n: orders(n, PASSES) for n in (10, 1000)},
        "chi2": {n: first_element_chi2(n, FIRST_ELEMENT_PASSES) for n in (3, 10, 33, 100)},
        "native": permute_cost(True, repeats) if native_available() else None,
        "numpy": permute_cost(False, repeats // 4),
        "locate": [r for r in mixtures.costs(quick) if r.get("library") == "flowloader"],
    }
    return record


def table(record: dict[str, Any]) -> str:
    lines = [
        f"**Orders**: {PASSES:,} passes of a 10-sample source use "
        f"{record['orders'][10]:,} distinct orders (target >= 900; the old permutation's "
        f"family had 16); of a 1,000-sample source, {record['orders'][1000]:,} (target 1,000).",
        "",
        f"**First element** over {FIRST_ELEMENT_PASSES:,} passes: its chi-square against a "
        "uniform one, below the 0.999 quantile of its distribution when uniform:",
        "",
        "| samples | chi-square | dof | 0.999 quantile |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for n, (chi2, dof) in record["chi2"].items():
        quantile = dof * (1 - 2 / (9 * dof) + 3.09 * (2 / (9 * dof)) ** 0.5) ** 3
        lines.append(f"| {n} | {chi2:.1f} | {dof} | {quantile:.1f} |")
    lines += ["", "**Cost per position** (sources of 10^4-10^7 samples):", ""]
    lines += ["| path | batches of 256, us | one call, us |", "| --- | ---: | ---: |"]
    for path in ("native", "numpy"):
        cost = record[path]
        if cost is None:
            lines.append(f"| {path} | not built here | |")
        else:
            lines.append(f"| {path} | {cost['batches_us']:.3f} | {cost['one_call_us']:.3f} |")
    for row in record["locate"]:
        label = f"Mixture at 1,000 sources, {row['how']}"
        lines.append(f"| {label} | {row['us']:.2f} | |")
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(quick))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.quick)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
