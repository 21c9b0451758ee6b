"""Optional torch bridge: used only when torch is already imported by the user's code.

flowloader never imports torch on its own initiative for core work. A torch tensor in a batch,
or a ``torch.Generator`` passed as ``generator``, can only exist if torch is already in
``sys.modules``, so looking there is both cheap and sufficient.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def imported_torch() -> ModuleType | None:
    """Return the torch module if the program has already imported it, else None."""
    return sys.modules.get("torch")


def is_tensor(obj: Any) -> bool:
    """True if ``obj`` is a torch tensor (without importing torch)."""
    torch = imported_torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def is_generator(obj: Any) -> bool:
    """True if ``obj`` is a ``torch.Generator`` (without importing torch)."""
    torch = imported_torch()
    return torch is not None and isinstance(obj, torch.Generator)


def draw_seed(generator: Any) -> int:
    """Draw a non-negative 63-bit seed from a ``torch.Generator``, advancing it."""
    torch = imported_torch()
    assert torch is not None
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def stack(tensors: list[Any]) -> Any:
    """``torch.stack`` along a new first dimension."""
    torch = imported_torch()
    assert torch is not None
    return torch.stack(tensors, 0)


def accelerator_available() -> bool:
    torch = imported_torch()
    return torch is not None and bool(torch.cuda.is_available())


def to_tensor(array: Any) -> Any:
    """``torch.from_numpy``: the tensor shares the array's memory (no copy)."""
    torch = imported_torch()
    assert torch is not None
    return torch.from_numpy(array)


def pin(tensor: Any) -> Any:
    """A page-locked copy (torch's caching host allocator reuses freed pinned blocks)."""
    return tensor.pin_memory() if hasattr(tensor, "pin_memory") else tensor


def current_device() -> int | None:
    """The calling thread's CUDA device, or None without CUDA."""
    torch = imported_torch()
    if torch is None or not torch.cuda.is_available():
        return None
    return int(torch.cuda.current_device())


def pin_thread_setup(device: int | None) -> None:
    """Make a pinning thread use the main thread's device (pinning may create a CUDA context;
    it must not land on device 0 of every rank) and one intra-op thread, as PyTorch's does."""
    torch = imported_torch()
    if torch is None:
        return
    torch.set_num_threads(1)
    if device is not None:
        torch.cuda.set_device(device)


def length(obj: Any) -> int:
    """First-dimension size of an array or tensor."""
    return int(obj.shape[0])
