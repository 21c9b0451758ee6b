"""Entry point of the ``flowloader`` command: parses the subcommand and dispatches."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import flowloader


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowloader",
        description=(
            "flowloader: PyTorch's torch.utils.data API on NumPy. "
            "Import it as `import flowloader as fl` and use fl.DataLoader like "
            "torch.utils.data.DataLoader."
        ),
    )
    parser.add_argument(
        "--version", action="version", version=f"flowloader {flowloader.__version__}"
    )
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return 0
