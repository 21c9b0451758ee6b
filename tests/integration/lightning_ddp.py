"""Run by test_frameworks.py: Lightning DDP on 2 CPU ranks (gloo) over the drop-in loader.

Each rank writes the sample ids of every batch it trained on, per epoch. With ``resume CKPT``
it continues from a mid-epoch checkpoint of an earlier run (Lightning calls the loader's
state_dict/load_state_dict); with ``torch`` it trains on torch's own DataLoader over the same
data, for comparison. Lightning re-launches this script for rank 1.
"""

from __future__ import annotations

import json
import os
import sys

import lightning as L
import torch
from framework_data import SAMPLES, Ids, shuffled_loader


class Recorder(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        x, ids = batch
        assert isinstance(x, torch.Tensor)
        assert isinstance(ids, torch.Tensor)
        self.seen.setdefault(self.current_epoch, []).append(ids.tolist())
        return self.layer(x).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    out_dir, mode = sys.argv[1], sys.argv[2]
    if mode == "torch":
        loader = torch.utils.data.DataLoader(
            Ids(SAMPLES), batch_size=4, shuffle=True, num_workers=2
        )
    else:
        loader = shuffled_loader()
    model = Recorder()
    checkpoints = L.pytorch.callbacks.ModelCheckpoint(
        dirpath=out_dir, every_n_train_steps=3, save_top_k=-1, filename="{epoch}-{step}"
    )
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[checkpoints] if mode == "full" else [],
        use_distributed_sampler=True,
    )
    checkpoint = sys.argv[3] if mode == "resume" else None
    trainer.fit(model, train_dataloaders=loader, ckpt_path=checkpoint)
    with open(os.path.join(out_dir, f"{mode}-rank{trainer.global_rank}.json"), "w") as f:
        json.dump({"seen": model.seen, "loader": type(trainer.train_dataloader).__name__}, f)


if __name__ == "__main__":
    main()
