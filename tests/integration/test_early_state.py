"""A loader's state saved by Lightning or Accelerate before it delivered anything (accelerate
issue 4204's class: the framework asks for ``state_dict()`` before training starts), and a
resumed loader saved again before it delivered anything: on 2 CPU ranks (gloo), each such
state must resume exactly where it was taken, nothing lost or repeated, and asking for it
must not change the order of the run that asked.

This file is also the script each framework runs on every rank
(``python test_early_state.py lightning|accelerate DIR MODE [CHECKPOINT]``); each rank writes
the sample ids of every batch it trained on, per epoch, to ``DIR/MODE-rank<r>.json``."""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

from tests.integration.test_frameworks import check_split, ranks, run  # noqa: E402

SAVED_AFTER = 3


def lightning_main(out_dir: str, mode: str, checkpoint: str | None) -> None:
    """``full``: train 2 epochs, saving at ``on_train_start`` (the loader's iterator exists,
    nothing delivered) and after 3 steps; ``resume``: continue from ``checkpoint``, saving
    again at ``on_train_start`` (resumed, nothing delivered yet)."""
    import lightning as L
    import torch

    from tests.integration.framework_data import shuffled_loader

    class Recorder(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.seen: dict[int, list[list[int]]] = {}

        def training_step(self, batch, batch_idx):
            x, ids = batch
            self.seen.setdefault(self.current_epoch, []).append(ids.tolist())
            return self.layer(x).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class SaveAtStart(L.Callback):
        def on_train_start(self, trainer, pl_module) -> None:
            trainer.save_checkpoint(os.path.join(out_dir, f"{mode}-start.ckpt"))

    callbacks: list = [SaveAtStart()]
    if mode == "full":
        callbacks.append(
            L.pytorch.callbacks.ModelCheckpoint(
                dirpath=out_dir,
                every_n_train_steps=SAVED_AFTER,
                save_top_k=-1,
                filename="{epoch}-{step}",
            )
        )
    model = Recorder()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=mode == "full",
        callbacks=callbacks,
        use_distributed_sampler=True,
    )
    trainer.fit(model, train_dataloaders=shuffled_loader(), ckpt_path=checkpoint)
    with open(os.path.join(out_dir, f"{mode}-rank{trainer.global_rank}.json"), "w") as f:
        json.dump({"seen": model.seen}, f)


def accelerate_main(out_dir: str, mode: str) -> None:
    """Accelerate's ``register_for_checkpointing`` over the drop-in with our
    DistributedSampler (the README's recipe). ``full``: a loader run without any state asked
    for, then one saved before its first batch (``start``) and after 3 (``mid``); ``resume``
    and ``again``: loaders loaded from ``start`` and ``mid`` (then from what ``resume`` saved
    of them right after loading, before any batch), each run for 2 epochs."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from flowloader.utils.data import DataLoader, DistributedSampler
    from tests.integration.framework_data import SAMPLES, Ids

    def build() -> tuple[DataLoader, Accelerator]:
        set_seed(0)  # the drop-in seeds its generator from torch's global RNG once, here
        dataset = Ids(SAMPLES)
        loader = DataLoader(
            dataset, batch_size=4, sampler=DistributedSampler(dataset), num_workers=2
        )
        accelerator = Accelerator(cpu=True)
        accelerator.register_for_checkpointing(loader)
        return loader, accelerator

    def two_epochs(loader: DataLoader, save_mid=None) -> dict[int, list[list[int]]]:
        seen: dict[int, list[list[int]]] = {}
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)  # as the recipe does; a resumed state's wins
            seen[epoch] = []
            for x, ids in loader:
                assert isinstance(x, torch.Tensor)
                seen[epoch].append(ids.tolist())
                if save_mid is not None and epoch == 0 and len(seen[0]) == SAVED_AFTER:
                    save_mid()
        return seen

    def state(name: str) -> str:
        return os.path.join(out_dir, name)

    out: dict[str, dict] = {}
    if mode == "full":
        out["plain"] = two_epochs(build()[0])  # no state asked for
        loader, accelerator = build()
        accelerator.save_state(state("start"))  # before the first iter()
        out["full"] = two_epochs(loader, lambda: accelerator.save_state(state("mid")))
    else:
        for name in ("start", "mid"):
            loader, accelerator = build()
            if mode == "resume":
                accelerator.load_state(state(name))
                accelerator.save_state(state(f"{name}-again"))  # loaded, not yet iterated
            else:
                accelerator.load_state(state(f"{name}-again"))
            out[name] = two_epochs(loader)
    with open(os.path.join(out_dir, f"{mode}-rank{accelerator.process_index}.json"), "w") as f:
        json.dump({"seen": out}, f)


def loader_position(checkpoint: str) -> tuple[int, int]:
    """(epoch, batches delivered) of the loader state inside a Lightning checkpoint."""
    import torch

    saved = torch.load(checkpoint, weights_only=False)["loops"]["fit_loop"]["state_dict"]
    state = saved["combined_loader"][0]
    return state["epoch"], state["batches_yielded"]


@pytest.mark.timeout(400)
def test_lightning_resumes_states_saved_before_any_batch(tmp_path) -> None:
    pytest.importorskip("lightning")
    script, out = os.path.abspath(__file__), str(tmp_path)

    def fit(mode: str, checkpoint: str | None = None) -> list[dict]:
        command = [sys.executable, script, "lightning", out, mode]
        run(command + ([checkpoint] if checkpoint else []), cwd=out)
        return ranks(out, mode)

    full = fit("full")
    check_split(full, padded=False)
    assert loader_position(str(tmp_path / "full-start.ckpt")) == (0, 0)
    # Saved at on_train_start: the whole of both epochs, as the run that saved it had them.
    for before, after in zip(full, fit("start", str(tmp_path / "full-start.ckpt")), strict=True):
        assert after["seen"] == before["seen"]
    # Resumed after 3 steps, saved again at on_train_start before its first batch, and
    # resumed from that: both continue at batch 4.
    mid = str(tmp_path / f"epoch=0-step={SAVED_AFTER}.ckpt")
    resumed_mid = fit("mid", mid)
    assert loader_position(str(tmp_path / "mid-start.ckpt")) == (0, SAVED_AFTER)
    for resumed in (resumed_mid, fit("again", str(tmp_path / "mid-start.ckpt"))):
        for before, after in zip(full, resumed, strict=True):
            assert after["seen"]["0"] == before["seen"]["0"][SAVED_AFTER:]
            assert after["seen"]["1"] == before["seen"]["1"]


@pytest.mark.timeout(400)
def test_accelerate_resumes_states_saved_before_any_batch(tmp_path) -> None:
    pytest.importorskip("accelerate")
    out = str(tmp_path)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", os.path.abspath(__file__), "accelerate", out]
    for mode in ("full", "resume", "again"):
        run([*command, mode], cwd=out)
    full, resumed, again = ranks(out, "full"), ranks(out, "resume"), ranks(out, "again")
    check_split([{"seen": rank["seen"]["full"]} for rank in full], padded=False)
    for rank in range(2):
        whole = full[rank]["seen"]["full"]
        assert full[rank]["seen"]["plain"] == whole  # asking for the state changed nothing
        for run_ in (resumed[rank]["seen"], again[rank]["seen"]):
            assert run_["start"] == whole  # the full first epoch, then the second
            assert run_["mid"]["0"] == whole["0"][SAVED_AFTER:]
            assert run_["mid"]["1"] == whole["1"]


if __name__ == "__main__":
    if sys.argv[1] == "lightning":
        lightning_main(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        accelerate_main(sys.argv[2], sys.argv[3])
