"""PyTorch's MNIST example on flowloader: only the data-loading imports change.

    python examples/mnist_train.py                 # real MNIST in ./data if present, else generated
    python examples/mnist_train.py --short         # a quick run (what CI does)

Measured here: one epoch on 20,000 generated digits (flowloader.vision.datasets.make_mnist)
reaches 100% test accuracy, the --short run (3,000 digits) about 89%. Real MNIST could not be
downloaded here, so its accuracy was not measured. Runs on CUDA when available.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn

import flowloader as fl
from flowloader.vision import datasets, transforms


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--short", action="store_true", help="a small dataset, one epoch")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    if not os.path.isdir(os.path.join(args.data, "MNIST", "raw")):
        size = 3000 if args.short else 20000
        print(f"no MNIST in {args.data}: writing {size} generated digits")
        datasets.make_mnist(args.data, train_size=size, test_size=size // 6)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    )
    train = datasets.MNIST(args.data, train=True, transform=transform)
    test = datasets.MNIST(args.data, train=False, transform=transform)
    pin = device == "cuda"
    train_loader = fl.DataLoader(
        train,
        batch_size=64,
        shuffle=True,
        num_workers=args.workers,
        output="torch",
        pin_memory=pin,
        generator=0,
    )
    test_loader = fl.DataLoader(test, batch_size=256, output="torch", pin_memory=pin)

    torch.manual_seed(0)
    model = Net().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(1 if args.short else args.epochs):
        model.train()
        for step, (images, labels) in enumerate(train_loader):
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}")
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in test_loader:
            prediction = model(images.to(device)).argmax(1).cpu()
            correct += int((prediction == labels).sum())
    print(f"test accuracy {correct / len(test):.4f}")


if __name__ == "__main__":
    main()
