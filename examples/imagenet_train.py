"""ImageFolder + DistributedSampler under torchrun, as in PyTorch's ImageNet example.

    torchrun --nproc_per_node=2 examples/imagenet_train.py PATH        # an ImageFolder root
    torchrun --nproc_per_node=2 examples/imagenet_train.py --short     # sample data, few steps

Each process trains a small CNN on its shard (DistributedDataParallel, gloo on CPU or nccl on
GPUs); the loader's rank and world size come from torch.distributed.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn

import flowloader as fl
from flowloader.vision import datasets, transforms

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?")
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    rank = dist.get_rank()
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if backend == "nccl" else "cpu"
    root = args.path or os.path.join(tempfile.gettempdir(), "flowloader-imagenet-example")
    if args.path is None and rank == 0:
        datasets.make_image_folder(root, num_classes=4, images_per_class=16, size=(160, 120))
    dist.barrier()

    size = 64 if args.short else 224
    train = datasets.ImageFolder(
        root,
        transform=transforms.Compose(
            [
                transforms.RandomResizedCrop(size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize(MEAN, STD),
            ]
        ),
    )
    sampler = fl.DistributedSampler(train, shuffle=True, seed=0)
    loader = fl.DataLoader(
        train,
        batch_size=8,
        sampler=sampler,
        num_workers=args.workers,
        output="torch",
        pin_memory=backend == "nccl",
    )
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, len(train.classes)),
    ).to(device)
    model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (images, labels) in enumerate(loader):
            loss = nn.functional.cross_entropy(model(images.to(device)), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rank == 0 and step % 2 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)
    if rank == 0:
        print(f"done: {len(loader)} batches per rank, {dist.get_world_size()} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
