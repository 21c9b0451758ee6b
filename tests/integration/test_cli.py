"""The `flowloader` command: help, exit codes, one-line errors, the JSON schema, sample data."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

from flowloader.cli import pipelines, sample_data
from flowloader.cli.bench import format_table
from flowloader.cli.main import build_parser
from flowloader.cli.make_shards import read_back
from flowloader.cli.progress import Progress
from flowloader.vision import datasets, image_backend

STAGES = ("read", "transform", "collate", "transport", "wait")
# The page that shows what `flowloader bench` prints (the README links to it).
BENCH_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "development.md"
# A progress line: its label, then only labelled numbers ("30 batches, 628 samples/s").
PROGRESS_LINE = re.compile(r"^[^:]+: (\[[#.]{24}\] )?[\d,]+(/[\d,]+)? [a-z]+(, [\d,]+ [a-z/]+)*$")
BENCH_PROGRESS = re.compile(r"flowloader ([\w-]+) workers=(\d+): [\d,]+ batches, [\d,]+ samples/s")

RECORD_KEYS = {
    "library": str,
    "pipeline": str,
    "dataset": str,
    "num_workers": (int, str),  # or "auto"
    "batch_size": int,
    "batches": int,
    "samples": int,
    "seconds": float,
    "samples_per_s": float,
    "batches_per_s": float,
    "mb_per_s": float,
    "first_batch_s": float,
    "cores_used": float,
    "stage_ms_per_batch": dict,
    "data_wait_fraction": float,
    "worker_busy_fraction": float,
    "verdict": str,
}


def flowloader(
    *args: str, env: dict | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flowloader", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    datasets.make_image_folder(root, num_classes=2, images_per_class=6, size=(64, 48))
    return root


@pytest.fixture(scope="module")
def tiny_mnist(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mnist"))
    datasets.make_mnist(root, train_size=256, test_size=16)
    return root


def test_help_and_version() -> None:
    done = flowloader()
    assert done.returncode == 0
    assert "bench" in done.stdout
    assert "make-dataset" in done.stdout
    version = flowloader("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("flowloader ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--workers", "x"], "--workers"),
        (["bench", "--workers", "0,automatic"], "integers or auto"),
        (["bench", "--workers", "0,,2"], "--workers"),
        (["bench", "--workers", "0,1,"], "--workers"),
        (["bench", "--workers", "-1"], "non-negative"),
        (["bench", "--pipeline", "resnet"], "unknown pipeline"),
        (["bench", "--batch-size", "0"], "positive"),
        (["bench", "--seconds", "1", "--epochs", "1"], "not allowed with"),
        (["bench", "/no/such/dir"], "no such directory"),
        (["bench", "--compare", "tensorflow"], "invalid choice"),
        (["make-dataset", "cifar", "x"], "invalid choice"),
        (["make-shards", "/no/such/dir", "out"], "/no/such/dir: no such directory"),
        (["make-shards", "/dev/null", "out"], "/dev/null: not a directory"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_options_and_paths_give_one_line_and_exit_2(args, message) -> None:
    done = flowloader(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
    assert "Traceback" not in done.stderr


def test_pipeline_that_does_not_fit_the_data(tiny_mnist) -> None:
    done = flowloader("bench", tiny_mnist, "--pipeline", "imagenet-val")
    assert done.returncode == 2
    assert "does not fit" in done.stderr


def check_records(stdout: str) -> list[dict]:
    records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for record in records:
        for key, kind in RECORD_KEYS.items():
            assert isinstance(record[key], kind), (key, record[key])
        assert set(record["stage_ms_per_batch"]) == set(STAGES)
        assert 0.0 <= record["data_wait_fraction"] <= 1.0
        assert record["samples"] > 0
    return records


@pytest.mark.timeout(120)
def test_bench_on_a_tiny_image_folder(tiny_images) -> None:
    done = flowloader(
        "bench", tiny_images, "--epochs", "1", "--workers", "0,1", "--batch-size", "4", "--json"
    )
    assert done.returncode == 0, done.stderr
    records = check_records(done.stdout)
    assert [(r["pipeline"], r["num_workers"]) for r in records] == [
        ("imagenet-train", 0),
        ("imagenet-train", 1),
        ("imagenet-val", 0),
        ("imagenet-val", 1),
    ]
    assert all(r["samples"] == 12 for r in records)
    assert records[0]["stage_ms_per_batch"]["transform"] > 0
    assert {r["image_backend"] for r in records} == {image_backend()}


@pytest.mark.timeout(120)
def test_bench_table_on_tiny_mnist(tiny_mnist) -> None:
    done = flowloader("bench", tiny_mnist, "--seconds", "0.5", "--workers", "0,2")
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed[1] == f"JPEG decoding: {image_backend()}"
    assert printed[3] == bench_example()[1][2]  # the page's columns, no "vs torch"
    assert "mnist: fastest at num_workers=" in done.stdout
    runs = [BENCH_PROGRESS.fullmatch(line).groups() for line in done.stderr.splitlines()]
    assert runs == [("mnist", "0"), ("mnist", "2")]


@pytest.mark.timeout(120)
def test_bench_reports_what_auto_chose_beside_the_grid(tiny_mnist) -> None:
    done = flowloader("bench", tiny_mnist, "--seconds", "0.5", "--workers", "0,1,auto")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("mnist: auto chose")]
    assert re.fullmatch(
        r"mnist: auto chose \d workers \(.+\); [\d,]+ samples/s, "
        r"([\d.]+x the best fixed count|within noise of the best fixed count \([\d.]+x; .+\))",
        line,
    ), line
    records = check_records(
        flowloader("bench", tiny_mnist, "--seconds", "0.5", "--workers", "auto", "--json").stdout
    )
    assert records[0]["num_workers"] == "auto"
    assert records[0]["tuning"][0]["reason"]


def bench_example() -> tuple[list[str], list[str]]:
    """The documented example of ``flowloader bench``: its progress lines and its table."""
    blocks: list[list[str]] = []
    inside = False
    for line in BENCH_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    [example] = [block for block in blocks if any("JPEG decoding:" in line for line in block)]
    table_at = next(i for i, line in enumerate(example) if line.startswith("JPEG decoding:"))
    return [line for line in example[:table_at] if line], example[table_at:]


def records_from(table: list[str]) -> list[dict]:
    """The records that a table's rows show (the numbers as printed)."""
    rows = table[4 : table.index("", 4)]
    records = []
    for row in rows:
        pipeline, workers, rate, batch_rate, mb, first, cores, *stages = row.split()
        records.append(
            {
                "library": "flowloader",
                "pipeline": pipeline,
                "num_workers": int(workers),
                "samples_per_s": float(rate.replace(",", "")),
                "batches_per_s": float(batch_rate),
                "mb_per_s": float(mb),
                "first_batch_s": float(first.removesuffix("s")),
                "cores_used": float(cores),
                "stage_ms_per_batch": dict(zip(STAGES, map(float, stages), strict=True)),
                "image_backend": table[0].removeprefix("JPEG decoding: "),
            }
        )
    return records


def test_the_documented_bench_example_is_what_the_command_prints() -> None:
    """The documented example runs what ``flowloader bench`` runs (every pipeline at its
    default workers), and its table is exactly what the command prints for those numbers:
    the same columns, widths and notes."""
    progress, table = bench_example()
    records = records_from(table)
    defaults = build_parser().parse_args(["bench"])
    runs = [(p, w) for p in pipelines.PIPELINES for w in defaults.workers]
    assert [(r["pipeline"], r["num_workers"]) for r in records] == runs
    assert format_table(records) == table
    assert [BENCH_PROGRESS.fullmatch(line).groups() for line in progress] == [
        (p, str(w)) for p, w in runs
    ]


def test_the_vs_torch_column_is_there_only_when_torch_ran() -> None:
    ours = {
        "library": "flowloader",
        "pipeline": "mnist",
        "num_workers": 0,
        "samples_per_s": 1000.0,
        "batches_per_s": 10.0,
        "mb_per_s": 3.0,
        "first_batch_s": 0.01,
        "cores_used": 1.0,
        "stage_ms_per_batch": dict.fromkeys(STAGES, 1.0),
        "image_backend": "pillow (test)",
    }
    alone = format_table([ours])
    assert "vs torch" not in alone[2]
    assert len(alone[4]) == len(alone[2])  # the row fills every column, the last included
    torch = {**ours, "library": "torch", "samples_per_s": 500.0, "stage_ms_per_batch": None}
    compared = format_table([ours, torch])
    assert compared[2].endswith("vs torch")
    assert compared[4].endswith("2.00x")
    assert compared[5].startswith("  (torch)")


@pytest.mark.parametrize(
    ("total", "line"),
    [
        (None, "run: 3,000 batches, 628 samples/s"),
        (4000, "run: [##################......] 3,000/4,000 batches, 628 samples/s"),
    ],
)
def test_every_number_on_a_progress_line_is_labelled(total, line) -> None:
    stream = io.StringIO()
    progress = Progress("run", total, "batches", stream)
    progress.update(3000, "628 samples/s")
    progress.close()
    assert stream.getvalue() == line + "\n"
    assert PROGRESS_LINE.match(line)


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="matplotlib present")
def test_plot_without_matplotlib_is_a_clear_error(tiny_mnist, tmp_path) -> None:
    done = flowloader("bench", tiny_mnist, "--plot", str(tmp_path / "x.png"))
    assert done.returncode == 2
    assert "pip install matplotlib" in done.stderr


def test_compare_without_torchvision_is_a_clear_error(tiny_mnist) -> None:
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision present")
    done = flowloader("bench", tiny_mnist, "--compare", "torch")
    assert done.returncode == 2
    assert "torchvision" in done.stderr


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("imagenet-like", "an ImageNet-like ImageFolder of JPEGs"),
        ("mnist", "an MNIST-format dataset"),
    ],
)
def test_make_dataset(kind, said, tmp_path) -> None:
    done = flowloader("make-dataset", kind, str(tmp_path / kind), "--images", "40")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {said} to {tmp_path / kind}\n"
    assert PROGRESS_LINE.match(done.stderr.strip()), done.stderr
    if kind == "mnist":
        assert len(datasets.MNIST(str(tmp_path / kind))) == 40
    else:
        assert len(datasets.ImageFolder(str(tmp_path / kind))) == 40


def test_builtin_sample_data_is_made_once_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLOWLOADER_CACHE", str(tmp_path))
    monkeypatch.setitem(sample_data.MNIST_SIZES, "train_size", 64)
    root = sample_data.builtin("mnist")
    assert root == str(tmp_path / "mnist")
    stamp = os.path.getmtime(os.path.join(root, "MNIST", "raw", "train-images-idx3-ubyte"))
    assert sample_data.builtin("mnist") == root
    assert os.path.getmtime(os.path.join(root, "MNIST", "raw", "train-images-idx3-ubyte")) == stamp
    assert not os.path.exists(root + ".partial")


def test_make_shards_says_how_to_read_them_back(tiny_images, tmp_path) -> None:
    """As a user would: pack an ImageFolder, then run the line the command printed."""
    done = flowloader("make-shards", tiny_images, "SHARDS", "--max-count", "5", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    said, line = done.stdout.splitlines()
    assert said == "12 samples in 3 shards in SHARDS (3 written, 0 already complete)"
    assert line == "read them with: flowloader.vision.datasets.ImageShards('SHARDS')"
    assert PROGRESS_LINE.match(done.stderr.strip()), done.stderr
    script = (
        f"import flowloader\nds = {line.removeprefix('read them with: ')}\n"
        "print(len(ds), ds[0][1], *ds.classes)"
    )
    read = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["12", "0", "class_000", "class_001"]
    assert len(datasets.ImageShards(str(tmp_path / "SHARDS" / "*.tar"))) == 12


def test_the_read_back_line_names_the_image_member() -> None:
    assert read_back("out", ["png"]) == (
        "flowloader.vision.datasets.ImageShards('out', image_key='png')"
    )
    assert read_back("out", ["jpeg", "jpg"]).startswith("flowloader.shards.ShardedDataset('out')")


def test_ctrl_c_in_bench_prints_what_it_measured(tiny_mnist) -> None:
    """SIGINT during the runs: the rows measured are printed, and the exit is 130."""
    # in-process runs: no shared-memory finalizer for the signal to land in (Python ignores a
    # KeyboardInterrupt raised inside one)
    command = ["bench", tiny_mnist, "--seconds", "1", "--workers", "0,0,0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "flowloader", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the second run's last progress line: by then the first run's row is kept
        lines = [process.stderr.readline() for _ in range(2)]
        assert "workers=0" in lines[1], lines
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "interrupted; the runs measured so far:" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("mnist ")]
    assert rows, out
    assert rows[0][1] == "0"  # the workers=0 run


def test_one_pipeline_makes_only_its_own_builtin_data(monkeypatch) -> None:
    from flowloader.cli import bench

    made = []
    monkeypatch.setattr(bench.sample_data, "builtin", lambda kind: made.append(kind) or kind)
    options = bench.Options(
        root=None,
        pipelines=["imagenet-train"],
        batch_size=4,
        workers=[0],
        seconds=1.0,
        epochs=None,
        json=False,
        compare=None,
        plot=None,
    )
    assert bench.roots_for(options) == {"imagenet-train": "imagenet-like"}
    assert made == ["imagenet-like"]
