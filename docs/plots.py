"""Plots for the benchmarks page, one per benchmark family, from the JSON its benchmark writes
(``python -m benchmarks.NAME ... --json FILE``): ``python docs/plots.py`` reads
``docs/explanation/data/*.json`` and writes ``docs/explanation/plots/NAME.png`` (matplotlib,
from the ``docs`` extra). The images are committed; the build does not run this."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent / "explanation"


Panel = tuple[str, dict[str, float], str]


# Integer fields that say which run a row is (its label), not what it measured.
SETTINGS = frozenset({"sources", "positions", "workers", "num_workers", "samples", "rows"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _panels(title: str, value: Any) -> list[Panel]:
    """Every group of comparable numbers in ``value``, as (title, label -> value, unit): a
    dict of numbers; a dict of runs (lists of numbers: their median); a dict of runs whose
    entries are dicts of measures (a panel per measure); a list of rows (a panel per numeric
    column, each row labelled by its text fields)."""
    if isinstance(value, dict) and value:
        items = list(value.items())
        if all(_is_number(v) for _, v in items):
            return [(title, dict(items), "")]
        if all(isinstance(v, list) and v and all(map(_is_number, v)) for _, v in items):
            return [(title, {k: statistics.median(v) for k, v in items}, "median of runs")]
        if all(isinstance(v, list) and v and all(isinstance(e, dict) for e in v) for _, v in items):
            measures = [k for k, m in items[0][1][0].items() if _is_number(m)]
            return [
                (
                    f"{title}: {measure}",
                    {k: statistics.median(e[measure] for e in v) for k, v in items},
                    "",
                )
                for measure in measures
            ]
        panels = []
        for key, inner in items:
            panels += _panels(f"{title}: {key}" if title else str(key), inner)
        return panels
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        rows = [row for row in value if any(_is_number(v) for v in row.values())]
        columns = [k for k in rows[0] if _is_number(rows[0][k]) and k not in SETTINGS]
        labels = [
            ", ".join(
                f"{k}={v}" if k in SETTINGS else str(v)
                for k, v in row.items()
                if isinstance(v, str) or k in SETTINGS
            )
            for row in rows
        ]
        return [
            (
                f"{title}: {column}",
                {lab: row[column] for lab, row in zip(labels, rows, strict=True) if column in row},
                "",
            )
            for column in columns
        ]
    return []


def numbers(record: dict[str, Any]) -> list[Panel]:
    """The record's panels. A side-by-side record (``medians``) is one panel."""
    if "medians" in record:
        return [(record.get("title", ""), record["medians"], record.get("unit", ""))]
    label = ", ".join(
        f"{key}={value}" for key, value in record.items() if isinstance(value, (str, int))
    )
    panels = []
    for key, value in record.items():
        if isinstance(value, (dict, list)):
            panels += _panels(f"{label}: {key}" if label else key, value)
    return panels


def plot_family(path: Path, out: Path) -> bool:
    """One figure for one benchmark's JSON; False when it holds nothing to plot."""
    records = json.loads(path.read_text())["results"]
    panels = [panel for record in records for panel in numbers(record)][:6]
    if not panels:
        return False
    figure, axes = plt.subplots(len(panels), 1, figsize=(9, 1.2 + 1.8 * len(panels)), squeeze=False)
    for axis, (title, values, unit) in zip(axes[:, 0], panels, strict=True):
        names = list(values)
        colours = ["#2b6cb0" if "flowloader" in n else "#a0aec0" for n in names]
        axis.barh(names, [values[n] for n in names], color=colours)
        axis.set_title(title, fontsize=9, loc="left")
        axis.set_xlabel(unit, fontsize=8)
        axis.tick_params(labelsize=8)
        axis.invert_yaxis()
    figure.suptitle(f"{path.stem} (python -m benchmarks.{path.stem})", fontsize=10)
    figure.tight_layout()
    figure.savefig(out, dpi=90)
    plt.close(figure)
    return True


def main() -> int:
    (HERE / "plots").mkdir(exist_ok=True)
    for path in sorted((HERE / "data").glob("*.json")):
        made = plot_family(path, HERE / "plots" / f"{path.stem}.png")
        print(f"{path.name}: {'plotted' if made else 'nothing to plot'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
