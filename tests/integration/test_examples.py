"""The examples run, and the resume example really continues where the checkpoint was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "resume_training.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(180)
def test_resume_example_matches_an_uninterrupted_run(tmp_path) -> None:
    checkpoint = str(tmp_path / "ckpt.json")
    crashed = run("--checkpoint", checkpoint)
    assert crashed.returncode == 1
    assert "crashing at step 25" in crashed.stdout
    resumed = run("--checkpoint", checkpoint, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    # The uninterrupted run: no crash, same seeds.
    whole = run("--checkpoint", str(tmp_path / "other.json"), "--crash-at", "0")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(resumed.stdout.splitlines()[-1]) == json.loads(whole.stdout.splitlines()[-1])
