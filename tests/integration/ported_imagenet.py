"""The data-loading half of pytorch/examples' imagenet/main.py, ported by renaming modules only
(``torchvision.datasets`` / ``.transforms`` -> ``flowloader.vision``'s, ``torch.utils.data``
-> ``flowloader.utils.data``, with its ``distributed`` submodule and ``Subset``). A tiny CNN
stands in for ``torchvision.models`` (not installed in CI); the loaders are the example's.

    python ported_imagenet.py DATA_ROOT [--workers 2] [-b 16]
"""

import argparse
import os

import torch
import torch.nn.functional as F
import torch.utils.data  # the training code's own torch import stays
from torch import nn

import flowloader.utils.data
import flowloader.utils.data.distributed
import flowloader.vision.datasets as datasets
import flowloader.vision.transforms as transforms
from flowloader.utils.data import Subset


def accuracy(output, target, topk=(1,)):
    _, predicted = output.topk(max(topk), 1, True, True)
    hits = predicted.t().eq(target.view(1, -1).expand_as(predicted.t()))
    return [hits[:k].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-b", "--batch-size", type=int, default=16)
    parser.add_argument("--distributed", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_dataset = datasets.ImageFolder(
        os.path.join(args.data, "train"),
        transforms.Compose(
            [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
             transforms.ToTensor(), normalize]
        ),
    )  # fmt: skip
    val_dataset = datasets.ImageFolder(
        os.path.join(args.data, "val"),
        transforms.Compose(
            [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]
        ),
    )
    if args.distributed:  # one rank of one: the example's sampler set-up without a process group
        train_sampler = flowloader.utils.data.distributed.DistributedSampler(
            train_dataset, num_replicas=1, rank=0
        )
        val_sampler = flowloader.utils.data.distributed.DistributedSampler(
            val_dataset, num_replicas=1, rank=0, shuffle=False, drop_last=True
        )
    else:
        train_sampler = val_sampler = None
    train_loader = flowloader.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
        num_workers=args.workers, pin_memory=True, sampler=train_sampler,
    )  # fmt: skip
    val_loader = flowloader.utils.data.DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False,
        num_workers=args.workers, pin_memory=True, sampler=val_sampler,
    )  # fmt: skip

    classes = len(train_dataset.classes)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 7, stride=4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(8, classes),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if train_sampler is not None:
        train_sampler.set_epoch(0)
    model.train()
    for i, (images, target) in enumerate(train_loader):
        images, target = images.to("cpu", non_blocking=True), target.to("cpu", non_blocking=True)
        loss = F.cross_entropy(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"Epoch: [0][{i + 1}/{len(train_loader)}]\tLoss {loss.item():.4e}")

    # The example's tail of a validation set that the distributed sampler dropped.
    seen = len(val_loader.sampler)
    tail = Subset(val_dataset, range(seen, len(val_dataset)))
    loaders = [val_loader]
    if len(tail):
        loaders.append(flowloader.utils.data.DataLoader(tail, batch_size=args.batch_size))
    model.eval()
    top1, top5, count = 0.0, 0.0, 0
    with torch.no_grad():
        for loader in loaders:
            for images, target in loader:
                acc1, acc5 = accuracy(model(images), target, topk=(1, min(5, classes)))
                top1 += acc1.item() * len(target)
                top5 += acc5.item() * len(target)
                count += len(target)
    assert count == len(val_dataset), (count, len(val_dataset))
    print(f" * Acc@1 {top1 / count:.3f} Acc@5 {top5 / count:.3f}")


if __name__ == "__main__":
    main()
