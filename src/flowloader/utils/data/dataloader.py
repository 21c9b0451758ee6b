"""``torch.utils.data.dataloader``'s names; its DataLoader hands out torch tensors."""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any, TypeVar

import flowloader
from flowloader import WorkerInfo, default_collate, default_convert, get_worker_info

__all__ = ["DataLoader", "WorkerInfo", "default_collate", "default_convert", "get_worker_info"]

T_co = TypeVar("T_co", covariant=True)


class DataLoader(flowloader.DataLoader[T_co]):
    """``flowloader.DataLoader`` with ``output="torch"`` by default: batches are torch tensors
    (sharing the batch's memory, no copy), as ``torch.utils.data.DataLoader`` gives.

    Raises ImportError at construction when torch is not installed; ``flowloader.DataLoader``
    hands out NumPy arrays and needs no torch.
    """

    def __init__(self, *args: Any, output: str = "torch", **kwargs: Any) -> None:
        if output == "torch" and importlib.util.find_spec("torch") is None:
            raise ImportError(
                "flowloader.utils.data.DataLoader hands out torch tensors, but torch is not "
                "installed (pip install torch). For NumPy batches without torch, use "
                "flowloader.DataLoader."
            )
        super().__init__(*args, output=output, **kwargs)


def _signature_with_torch_output() -> inspect.Signature:
    """The parent's full signature (for help() and introspection), with output="torch"."""
    signature = inspect.signature(flowloader.DataLoader.__init__)
    parameters = [
        p.replace(default="torch") if p.name == "output" else p
        for p in signature.parameters.values()
    ]
    return signature.replace(parameters=parameters)


DataLoader.__init__.__signature__ = _signature_with_torch_output()  # type: ignore[attr-defined]
