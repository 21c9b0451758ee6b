"""What examples/resume_training.py tells its user: the checkpoint it really has, and a
resume with no checkpoint that starts from the beginning instead of failing."""

from __future__ import annotations

import json

import pytest

from .test_examples import run


@pytest.mark.timeout(180)
def test_a_crash_names_the_last_checkpoint_taken(tmp_path) -> None:
    crashed = run("--checkpoint", str(tmp_path / "ckpt.json"), "--every", "3")
    assert crashed.returncode == 1
    assert "crashing at step 25 (last checkpoint: step 24)" in crashed.stdout


@pytest.mark.timeout(180)
def test_resuming_with_no_checkpoint_starts_from_the_beginning(tmp_path) -> None:
    checkpoint = str(tmp_path / "ckpt.json")
    crashed = run("--checkpoint", checkpoint, "--crash-at", "7")
    assert crashed.returncode == 1
    assert "crashing at step 7 (last checkpoint: none yet)" in crashed.stdout
    resumed = run("--checkpoint", checkpoint, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert resumed.stdout.startswith(f"no checkpoint at {checkpoint}: starting from the beginning")
    whole = run("--checkpoint", str(tmp_path / "other.json"), "--crash-at", "0")
    assert json.loads(resumed.stdout.splitlines()[-1]) == json.loads(whole.stdout.splitlines()[-1])


@pytest.mark.timeout(180)
def test_a_new_run_does_not_resume_from_an_earlier_runs_checkpoint(tmp_path) -> None:
    checkpoint = str(tmp_path / "ckpt.json")
    assert run("--checkpoint", checkpoint, "--crash-at", "0").returncode == 0  # a finished run
    crashed = run("--checkpoint", checkpoint, "--crash-at", "7")
    assert "(last checkpoint: none yet)" in crashed.stdout
    resumed = run("--checkpoint", checkpoint, "--resume")
    assert "no checkpoint" in resumed.stdout
