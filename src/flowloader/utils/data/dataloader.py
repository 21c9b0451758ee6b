"""``torch.utils.data.dataloader``'s names; its DataLoader hands out torch tensors.

Where torch is installed, ``DataLoader`` is also a ``torch.utils.data.DataLoader`` and
``default_collate`` / ``default_convert`` give tensors (see ``_torch_loader``). Without torch,
the names are flowloader's and ``DataLoader`` refuses to be built, pointing at
``flowloader.DataLoader``.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

import flowloader
from flowloader import WorkerInfo, get_worker_info
from flowloader._compat import torch as _torch

__all__ = ["DataLoader", "WorkerInfo", "default_collate", "default_convert", "get_worker_info"]

T_co = TypeVar("T_co", covariant=True)

if _torch.installed():
    from ._torch_collate import default_collate as default_collate
    from ._torch_collate import default_convert as default_convert
    from ._torch_loader import DataLoader as DataLoader
else:
    from flowloader import default_collate as default_collate
    from flowloader import default_convert as default_convert

    class DataLoader(flowloader.DataLoader[T_co]):  # type: ignore[no-redef]
        """Needs torch: the drop-in hands out torch tensors."""

        def __init__(self, *args: Any, output: str = "torch", **kwargs: Any) -> None:
            if output == "torch":
                raise ImportError(
                    "flowloader.utils.data.DataLoader hands out torch tensors, but torch is not "
                    "installed (pip install torch). For NumPy batches without torch, use "
                    "flowloader.DataLoader."
                )
            super().__init__(*args, output=output, **kwargs)


def _signature_with_torch_output() -> inspect.Signature:
    """flowloader.DataLoader's full signature (for help(), and for the frameworks that
    re-create a loader from it), with output="torch"."""
    signature = inspect.signature(flowloader.DataLoader.__init__)
    parameters = [
        p.replace(default="torch") if p.name == "output" else p
        for p in signature.parameters.values()
    ]
    return signature.replace(parameters=parameters)


DataLoader.__init__.__signature__ = _signature_with_torch_output()  # type: ignore[attr-defined]
