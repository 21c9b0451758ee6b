"""Save the loader's position with the model every N steps; after a crash, resume exactly.

    python examples/resume_training.py --checkpoint /tmp/ckpt.json            # trains, "crashes"
    python examples/resume_training.py --checkpoint /tmp/ckpt.json --resume   # continues

The first run stops itself abruptly at step 25 (as a preempted job would); the second run
loads the last checkpoint and continues with exactly the batches the first run would have
seen next, even though it uses another number of workers (with no checkpoint yet, say after
``--crash-at 7``, it starts from the beginning). NumPy only: the "model" is a running sum, so
you can check that nothing was lost or repeated.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

import flowloader as fl


class Squares(fl.Dataset):
    """Sample i: the number i, with a random jitter from its own generator."""

    def __len__(self) -> int:
        return 200

    def __getitem__(self, i: int):
        rng = fl.sample_rng()  # the same for sample i whatever num_workers is
        return np.float64(i) + (rng.random() if rng is not None else 0.0)


def save(path: str, model: dict, loader: fl.DataLoader) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w") as out:
        json.dump({"model": model, "loader": loader.state_dict()}, out)
    os.replace(temporary, path)  # never leave a half-written checkpoint


def load(path: str, loader: fl.DataLoader) -> dict | None:
    """The model saved at ``path``, with ``loader`` moved to where it was; None if there is
    no checkpoint (the job stopped before its first one)."""
    if not os.path.exists(path):
        return None
    with open(path) as stream:
        saved = json.load(stream)
    loader.load_state_dict(saved["loader"])
    return saved["model"]


def start(args: argparse.Namespace, loader: fl.DataLoader) -> dict:
    """The model to train: the checkpoint's with ``--resume`` (if there is one), else new.
    A new run first removes a checkpoint an earlier run left, which is not its own."""
    if args.resume:
        model = load(args.checkpoint, loader)
        if model is not None:
            print(f"resuming from the checkpoint of step {model['step']}", flush=True)
            return model
        print(f"no checkpoint at {args.checkpoint}: starting from the beginning", flush=True)
    elif os.path.exists(args.checkpoint):
        os.remove(args.checkpoint)
    return {"step": 0, "epoch": 0, "total": 0.0, "seen": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description="checkpoint and resume a training loop")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    parser.add_argument("--crash-at", type=int, default=25)
    args = parser.parse_args()

    workers = 1 if args.resume else 2  # resuming with another num_workers is fine
    loader = fl.DataLoader(Squares(), batch_size=16, shuffle=True, num_workers=workers, generator=0)
    model = start(args, loader)
    last_saved = "none yet"
    for epoch in range(model["epoch"], args.epochs):
        model["epoch"] = epoch
        for batch in loader:
            model["step"] += 1
            model["total"] += float(batch.sum())  # the "training step"
            model["seen"] += len(batch)
            if model["step"] % args.every == 0:
                save(args.checkpoint, model, loader)
                last_saved = f"step {model['step']}"
            if not args.resume and model["step"] == args.crash_at:
                crash = f"crashing at step {model['step']} (last checkpoint: {last_saved})"
                print(crash, flush=True)
                os._exit(1)
        model["epoch"] = epoch + 1
        save(args.checkpoint, model, loader)
        last_saved = f"step {model['step']}"
    print(json.dumps({"steps": model["step"], "seen": model["seen"], "total": model["total"]}))


if __name__ == "__main__":
    main()
