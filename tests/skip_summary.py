"""The end of a test run: how many tests skipped for a missing optional package, and the
``pip install`` that brings each (``tests/conftest.py``'s ``pytest_terminal_summary``).

The skip reasons that name a missing package are pytest.importorskip's ("could not import
'x.y': No module named 'x'") and the tests' own "needs jax" / "torch is not installed" for a
package of one of flowloader's extras; other skips (no CUDA, a package that is present) are
not counted.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
# "needs jax", "torch is not installed", "Ray is not installed (pip install ...)"
_NEEDS = re.compile(r"^(?:needs ([\w.-]+)|([\w.-]+) is not installed)(?: \(.*\))?$")
_EXTRA = re.compile(r"^([A-Za-z0-9_.-]+)[^;]*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def optional_packages(distribution: str = "flowloader") -> dict[str, list[str]]:
    """Package -> the extras of ``distribution`` that install it, the test extras
    (``shards-test``, ...) first, as CI installs them."""
    try:
        requirements = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    extras: dict[str, list[str]] = defaultdict(list)
    for requirement in requirements:
        match = _EXTRA.match(requirement)
        if match is not None:
            extras[_normal(match[1])].append(match[2])
    return {
        name: sorted(found, key=lambda extra: not extra.endswith("-test"))
        for name, found in extras.items()
    }


def missing_package(reason: str, optional: dict[str, list[str]]) -> str | None:
    """The package whose absence a skip reason gives, or None for another reason."""
    reason = reason.removeprefix("Skipped: ")
    no_module = _NO_MODULE.search(reason)
    if no_module is not None:
        return no_module[1].split(".")[0]
    needs = _NEEDS.match(reason)
    if needs is not None and _normal(needs[1] or needs[2]) in optional:
        return needs[1] or needs[2]
    return None


def install_command(package: str, optional: dict[str, list[str]]) -> str:
    extras = optional.get(_normal(package))
    return f'pip install -e ".[{extras[0]}]"' if extras else f"pip install {package}"


def summary(reasons: Iterable[str], optional: dict[str, list[str]]) -> list[str]:
    """A title, then one line per install command: how many skips it would run, and for
    which packages. Empty when nothing skipped for a missing package."""
    skipped: dict[str, Counter[str]] = defaultdict(Counter)
    for reason in reasons:
        package = missing_package(reason, optional)
        if package is not None:
            skipped[install_command(package, optional)][package] += 1
    if not skipped:
        return []
    total = sum(sum(packages.values()) for packages in skipped.values())
    width = max(len(command) for command in skipped)
    lines = [f"{total} skipped for a missing optional package; to run them:"]
    for command, packages in sorted(skipped.items(), key=lambda i: (-sum(i[1].values()), i[0])):
        lines.append(
            f"  {command:<{width}}  {sum(packages.values()):>4}  ({', '.join(sorted(packages))})"
        )
    return lines


def _reason(report: Any) -> str:
    """A skip report's reason (its longrepr is (path, line, reason) for a skip)."""
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def write(terminalreporter: Any) -> None:
    """Write :func:`summary` of this run's skips at the end of pytest's report."""
    reasons = [_reason(report) for report in terminalreporter.stats.get("skipped", [])]
    lines = summary(reasons, optional_packages())
    if lines:
        terminalreporter.write_sep("=", "missing optional packages")
        for line in lines:
            terminalreporter.write_line(line)
