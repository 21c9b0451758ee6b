"""Workers behave like torch's for torch code: one intra-op thread, tensors through shared
memory, and no torch in workers that never use it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import flowloader as fl

from .loader_datasets import TorchTensors, TorchThreads

pytestmark = pytest.mark.torch


def run_fresh(code: str, tmp_path) -> str:
    """Run ``code`` as a script in a fresh interpreter (torch not imported unless the code
    does; a script file, so that spawn can import its classes)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_run_torch_on_one_thread(context) -> None:
    torch = pytest.importorskip("torch")
    assert torch.get_num_threads() >= 1
    loader = fl.DataLoader(
        TorchThreads(), batch_size=None, num_workers=2, multiprocessing_context=context
    )
    assert list(loader) == [1, 1, 1, 1]


def test_worker_init_fn_may_raise_the_thread_count_again() -> None:
    pytest.importorskip("torch")
    from .loader_datasets import set_two_torch_threads

    loader = fl.DataLoader(
        TorchThreads(), batch_size=None, num_workers=2, worker_init_fn=set_two_torch_threads
    )
    assert list(loader) == [2, 2, 2, 2]


def test_a_dataset_that_imports_torch_late_gets_one_thread_and_a_seed(tmp_path) -> None:
    pytest.importorskip("torch")
    out = run_fresh(
        """
        import sys
        import flowloader as fl

        class Late(fl.Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                import torch  # first imported here, inside the worker
                return torch.get_num_threads(), float(torch.rand(1))

        def run():
            return list(fl.DataLoader(Late(), batch_size=None, num_workers=2, generator=3))

        first = run()
        assert "torch" not in sys.modules, "the main process imported torch"
        assert [threads for threads, _ in first] == [1, 1, 1, 1], first
        assert first[0][1] != first[1][1]  # each worker seeded torch differently
        assert run() == first  # and reproducibly
        print("ok")
        """,
        tmp_path,
    )
    assert out == "ok"


def test_a_worker_that_never_uses_torch_never_imports_it(tmp_path) -> None:
    out = run_fresh(
        """
        import sys
        import flowloader as fl

        class Plain(fl.Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                return "torch" in sys.modules

        if __name__ == "__main__":
            for context in ("fork", "spawn"):
                loader = fl.DataLoader(Plain(), batch_size=2, num_workers=2,
                                       multiprocessing_context=context)
                assert not any(flag for batch in loader for flag in batch), context
            assert "torch" not in sys.modules
            print("ok")
        """,
        tmp_path,
    )
    assert out == "ok"


@pytest.mark.parametrize("num_workers", [0, 2])
def test_tensor_samples_are_collated_into_tensors(num_workers) -> None:
    torch = pytest.importorskip("torch")
    loader = fl.DataLoader(TorchTensors(), batch_size=4, num_workers=num_workers)
    batches = list(loader)
    assert [len(images) for images, _, _ in batches] == [4, 4, 2]
    images, labels, ints = batches[0]
    assert isinstance(images, torch.Tensor)
    assert images.dtype == torch.float32
    assert images.shape == (4, 3, 8, 8)
    assert isinstance(labels, torch.Tensor)
    assert labels.dtype == torch.int64
    assert ints.dtype.str == "<i8"  # Python ints still collate to NumPy int64
    everything = torch.cat([images for images, _, _ in batches])
    assert torch.equal(everything[:, 0, 0, 0], torch.arange(10, dtype=torch.float32))
    assert torch.equal(torch.cat([labels for _, labels, _ in batches]), torch.arange(10))
