"""The data-loading half of pytorch/examples' mnist/main.py, written against torch.utils.data +
torchvision and ported the way the README promises: by renaming modules only
(``torchvision`` -> ``flowloader.vision``, ``torch.utils.data`` -> ``flowloader.utils.data``).
Batches must arrive as torch tensors that ``.to(device)`` and the loss accept unchanged.

    python ported_mnist.py DATA_ROOT [--workers N]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

import flowloader.utils.data
from flowloader.vision import datasets, transforms


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 5, stride=2)
        self.fc = nn.Linear(8 * 12 * 12, 10)

    def forward(self, x):
        return F.log_softmax(self.fc(torch.flatten(F.relu(self.conv(x)), 1)), dim=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(1)
    device = torch.device("cpu")
    normalize = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    )
    train_set = datasets.MNIST(args.data, train=True, download=True, transform=normalize)
    test_set = datasets.MNIST(args.data, train=False, transform=normalize)
    # The example passes only batch sizes on a CPU, and these with an accelerator.
    loader_options = {}
    if args.workers:
        loader_options = {"num_workers": args.workers, "persistent_workers": True, "shuffle": True}
    train_loader = flowloader.utils.data.DataLoader(train_set, batch_size=64, **loader_options)
    test_loader = flowloader.utils.data.DataLoader(test_set, batch_size=1000, **loader_options)

    model = TinyNet().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    model.train()
    for step, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(
                f"Train Epoch: 1 [{step * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss:.6f}"
            )

    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target.view_as(output.argmax(dim=1))).sum().item()
    total = len(test_loader.dataset)
    print(
        f"\nTest set: Average loss: {test_loss / total:.4f}, "
        f"Accuracy: {correct}/{total} ({100.0 * correct / total:.0f}%)\n"
    )


if __name__ == "__main__":
    main()
