"""Entry point of the ``flowloader`` command: parses the subcommand and dispatches.

Mistakes on the command line and unusable data paths are reported in one line on stderr with
exit code 2, never with a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import flowloader

from ..resources import usable_cores
from . import pipelines, sample_data

# Commands that continue where an interrupted run of theirs stopped.
RESUMABLE = ("make-shards", "make-tokens")


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _workers_list(text: str) -> list[int | str]:
    """Worker counts, and "auto" (the loader tunes its own)."""
    try:  # an empty item ("0,,2") is an error too
        values = [v if v == "auto" else int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers or auto, got {text!r}"
        ) from None
    if any(isinstance(v, int) and v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _pipeline_list(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in pipelines.PIPELINES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown pipeline {', '.join(unknown) or text!r}; "
            f"choose from {', '.join(pipelines.PIPELINES)}"
        )
    return names


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="flowloader",
        description="flowloader: PyTorch's torch.utils.data API on NumPy, fast and robust.",
    )
    parser.add_argument(
        "--version", action="version", version=f"flowloader {flowloader.__version__}"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    bench = commands.add_parser(
        "bench",
        help="measure the loading pipelines (on built-in sample data unless PATH is given)",
        description="Run the ImageNet-style and MNIST pipelines at a few worker counts and show "
        "throughput and where the time goes. Without PATH, sample data is made once and cached "
        f"under {sample_data.cache_dir()}.",
    )
    bench.add_argument("path", nargs="?", metavar="PATH", help="an ImageFolder or MNIST root")
    bench.add_argument(
        "--pipeline",
        type=_pipeline_list,
        default=None,
        help=f"comma-separated, from {', '.join(pipelines.PIPELINES)}",
    )
    bench.add_argument(
        "--batch-size",
        type=_positive(int),
        default=None,
        help="samples per batch (default 64)",
    )
    bench.add_argument(
        "--workers",
        type=_workers_list,
        default=[0, 1, 2],
        help="e.g. 0,1,2 (default); auto: num_workers='auto', what it chose beside the grid",
    )
    length = bench.add_mutually_exclusive_group()
    length.add_argument(
        "--seconds", type=_positive(float), help="run each measurement this long (default 3)"
    )
    length.add_argument(
        "--epochs", type=_positive(int), help="run each measurement this many epochs"
    )
    bench.add_argument(
        "--json", action="store_true", help="print one JSON record per run instead of a table"
    )
    bench.add_argument(
        "--compare", choices=["torch"], help="also run torch.utils.data + torchvision"
    )
    bench.add_argument(
        "--plot", metavar="FILE.png", help="plot throughput against workers (needs matplotlib)"
    )
    make = commands.add_parser("make-dataset", help="write a sample dataset in a real format")
    make.add_argument("kind", choices=sample_data.KINDS)
    make.add_argument("directory", metavar="DIR")
    make.add_argument(
        "--images", type=_positive(int), help="how many images (default: the built-in size)"
    )
    shards = commands.add_parser(
        "make-shards",
        help="pack an ImageFolder into WebDataset-format tar shards (resumable)",
        description="Write every image of the ImageFolder SRC, with its class index as 'cls', "
        "into tar shards in DST (shard-000000.tar, ... with index files), and the class names "
        "into DST/classes.json. Files that are not readable images (not identified by Pillow, "
        "damaged, or a truncated JPEG) are skipped and counted. A rerun keeps the shards "
        "already complete. Every shard is read back and checked.",
    )
    shards.add_argument("source", metavar="SRC", help="an ImageFolder root")
    shards.add_argument("destination", metavar="DST", help="the directory for the shards")
    shards.add_argument(
        "--max-count", type=_positive(int), default=10_000, help="samples per shard (10,000)"
    )
    shards.add_argument(
        "--max-size", type=_positive(int), default=1 << 30, help="bytes per shard (1 GiB)"
    )
    shards.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first file that is not a readable image instead of skipping it",
    )
    _add_make_tokens(commands)
    return parser


def _add_make_tokens(commands: Any) -> None:
    tokens = commands.add_parser(
        "make-tokens",
        help="write documents (token ids, or text with --tokenizer) into a token file (resumable)",
        description="Write the documents of INPUT into the flat token file OUTPUT and its "
        "index (OUTPUT.idx.npy, OUTPUT.idx.json), for flowloader.text.TokenDataset. Without "
        "--tokenizer the documents are token ids: a .jsonl or .json file as JSON Lines, each "
        "line a list of ids or an object holding the list under --column; a Parquet or Arrow "
        "table (a file, a folder of them, or a datasets save_to_disk folder) as its list "
        "column --column; any other file as text, each line whitespace-separated ids. With "
        "--tokenizer the documents are texts: a table's column --column, JSON Lines' field "
        "--column, or a text file's lines, tokenized in --workers processes (the output is "
        "the same bytes for any number). Blank lines are skipped. INPUT is streamed, never "
        "loaded whole. Interrupted, rerun the same command: it continues where it stopped.",
    )
    tokens.add_argument(
        "source",
        metavar="INPUT",
        help="a .jsonl/.json file, a text file, or a Parquet/Arrow table (file or folder)",
    )
    tokens.add_argument(
        "output", metavar="OUTPUT", help="the token file to write (its index goes beside it)"
    )
    tokens.add_argument(
        "--dtype",
        choices=["uint16", "uint32"],
        default="uint16",
        help="the ids' type on disk (uint16, the default, holds ids below 65,536)",
    )
    tokens.add_argument(
        "--vocab-size", type=_positive(int), help="refuse token ids at or above this"
    )
    tokens.add_argument(
        "--column",
        "--field",
        dest="column",
        help="the table column or JSON field holding each document (default: tokens; with "
        "--tokenizer, text)",
    )
    tokens.add_argument(
        "--tokenizer",
        metavar="TOKENIZER_JSON",
        help="a Hugging Face tokenizers file (tokenizer.json) to tokenize texts with; "
        "nothing is downloaded",
    )
    tokens.add_argument(
        "--eos",
        metavar="TOKEN",
        help="a token of --tokenizer to append to every document, such as '<|endoftext|>'",
    )
    cores = usable_cores()
    tokens.add_argument(
        "--workers",
        type=_positive(int),
        default=cores,
        help="processes tokenizing with --tokenizer (default: the cores this process may use, "
        f"here {cores})",
    )
    tokens.add_argument(
        "--force", action="store_true", help="replace OUTPUT if it is already a finished token file"
    )


def _make_shards(args: argparse.Namespace) -> int:
    from .bench import require_directory
    from .make_shards import pack_image_folder, plan_image_folder, read_back
    from .progress import Progress

    require_directory(args.source)
    bar = Progress("make-shards", len(plan_image_folder(args.source)), "images")
    try:
        report = pack_image_folder(
            args.source, args.destination, args.max_count, args.max_size, bar.update, args.strict
        )
    finally:
        bar.close()
    print(
        f"{report.samples} samples in {len(report.shards)} shards in {args.destination} "
        f"({report.written} written, {report.kept} already complete)"
    )
    if report.skipped:
        count, (path, problem) = len(report.skipped), report.skipped[0]
        what = "files that are not readable images"
        if count == 1:
            what = "file that is not a readable image"
        print(f"skipped {count} {what} (first: {path}: {problem})")
    print(f"read them with: {read_back(args.destination, report.extensions)}")
    return 0


def _make_tokens(args: argparse.Namespace) -> int:
    from .bench import UsageError
    from .make_tokens import make_tokens, progress_total, read_back
    from .progress import Progress

    bar = Progress("make-tokens", *progress_total(args.source, args.column, args.tokenizer))

    def show(read: int, documents: int, tokens: int) -> None:
        bar.update(read, f"{documents:,} documents, {tokens:,} tokens")

    try:
        report = make_tokens(
            args.source,
            args.output,
            args.dtype,
            args.vocab_size,
            args.column,
            show,
            args.force,
            args.tokenizer,
            args.workers,
            args.eos,
        )
    except FileExistsError as error:
        raise UsageError(
            f"{args.output} is already a finished token file: pass --force to replace it"
        ) from error
    except (OSError, ValueError) as error:
        partial = args.output + ".partial"
        if not os.path.exists(partial):
            raise
        raise UsageError(
            f"{error}. What was written is kept in {partial}* for a rerun of the same command, "
            f"which continues there; delete {partial}* to start over"
        ) from error
    finally:
        bar.close()
    kept = (
        f" (the first {report.continued} kept from an interrupted run)" if report.continued else ""
    )
    print(
        f"{report.documents} documents, {report.tokens} {args.dtype} tokens in {args.output}{kept}"
    )
    print(f"read it with: {read_back(args.output)}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import Options, run

    if args.pipeline is not None:
        chosen = args.pipeline
    elif args.path is None:
        chosen = list(pipelines.PIPELINES)
    else:
        mnist = pipelines.kind_of(args.path) == "mnist"
        chosen = ["mnist"] if mnist else ["imagenet-train", "imagenet-val"]
    options = Options(
        root=args.path,
        pipelines=chosen,
        batch_size=args.batch_size or 64,
        workers=args.workers,
        seconds=None if args.epochs else (args.seconds or 3.0),
        epochs=args.epochs,
        json=args.json,
        compare=args.compare,
        plot=args.plot,
    )
    return run(options)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    from .bench import UsageError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "bench":
            return _bench(args)
        if args.command == "make-shards":
            return _make_shards(args)
        if args.command == "make-tokens":
            return _make_tokens(args)
        if args.command == "make-dataset":
            sample_data.make(args.kind, args.directory, args.images)
            print(f"wrote {sample_data.KINDS[args.kind]} to {args.directory}")
            return 0
    except UsageError as error:
        print(f"flowloader {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RuntimeError) as error:
        print(f"flowloader {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        resume = ": rerun the same command to continue" if args.command in RESUMABLE else ""
        print(f"interrupted{resume}", file=sys.stderr)
        return 130
    parser.print_help(sys.stdout)
    return 0
