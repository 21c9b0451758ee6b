"""Optional torch bridge: used only when torch is already imported by the user's code.

flowloader never imports torch on its own initiative for core work. A torch tensor in a batch,
or a ``torch.Generator`` passed as ``generator``, can only exist if torch is already in
``sys.modules``, so looking there is both cheap and sufficient.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np


def imported_torch() -> ModuleType | None:
    """Return the torch module if the program has already imported it, else None."""
    return sys.modules.get("torch")


def installed() -> bool:
    """Whether torch can be imported here (without importing it)."""
    return imported_torch() is not None or importlib.util.find_spec("torch") is not None


def require_torch() -> ModuleType:
    """The torch module, imported if needed: for rebuilding tensors a worker sent, which only
    exist when the user's dataset uses torch."""
    return imported_torch() or importlib.import_module("torch")


def when_imported(callback: Callable[[ModuleType], None]) -> None:
    """Run ``callback(torch)`` now if torch is imported, else right after the process imports
    it (a dataset may import torch lazily). Never imports torch itself."""
    torch = imported_torch()
    if torch is not None:
        callback(torch)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(callback))


class _AfterTorchImport:
    """An import hook (a ``sys.meta_path`` finder; importlib.abc is not imported for it, it
    costs 13 ms at start-up) that lets the normal finders locate torch, then runs a callback
    once torch's ``__init__`` has executed. It removes itself at the first import of torch."""

    def __init__(self, callback: Callable[[ModuleType], None]) -> None:
        self._callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute, callback = loader.exec_module, self._callback

        def exec_module(module: ModuleType) -> None:
            execute(module)
            callback(module)

        loader.exec_module = exec_module
        return spec


def limit_threads(torch: ModuleType) -> None:
    """One intra-op thread, as torch's DataLoader workers have: several workers each running
    torch's default thread pool oversubscribe the cores many times over."""
    torch.set_num_threads(1)


def is_tensor(obj: Any) -> bool:
    """True if ``obj`` is a torch tensor (without importing torch)."""
    torch = imported_torch()
    return torch is not None and isinstance(obj, torch.Tensor)


def is_iterable_dataset(obj: Any) -> bool:
    """True for a ``torch.utils.data.IterableDataset`` (one exists only once torch is
    imported, so this never imports it)."""
    data = sys.modules.get("torch.utils.data")
    iterable = getattr(data, "IterableDataset", None)
    return iterable is not None and isinstance(obj, iterable)


def is_generator(obj: Any) -> bool:
    """True if ``obj`` is a ``torch.Generator`` (without importing torch)."""
    torch = imported_torch()
    return torch is not None and isinstance(obj, torch.Generator)


def draw_seed(generator: Any) -> int:
    """Draw a non-negative 63-bit seed from a ``torch.Generator``, advancing it."""
    torch = imported_torch()
    assert torch is not None
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def as_shareable_array(obj: Any) -> np.ndarray | None:
    """A CPU tensor as a NumPy view of its memory (no copy), or None when it cannot be one
    (not a tensor, on a device, needing grad, or of a dtype NumPy lacks)."""
    if not is_tensor(obj) or obj.device.type != "cpu" or obj.requires_grad:
        return None
    try:
        return obj.numpy()
    except (TypeError, RuntimeError):
        return None


def check_stackable(tensor: Any) -> None:
    """Refuse, in torch's words, the tensors its default collate cannot stack: nested and
    sparse ones."""
    torch = imported_torch()
    assert torch is not None
    sparse = {
        torch.sparse_coo,
        torch.sparse_csr,
        torch.sparse_csc,
        torch.sparse_bsr,
        torch.sparse_bsc,
    }
    if tensor.is_nested:
        kind = "nested"
    elif tensor.layout in sparse:
        kind = "sparse"
    else:
        return
    raise RuntimeError(
        f"Batches of {kind} tensors are not currently supported by the default collate_fn; "
        "please provide a custom collate_fn to handle them appropriately."
    )


def stack(tensors: Sequence[Any], allocate: Callable[..., np.ndarray] | None = None) -> Any:
    """``torch.stack`` along a new first dimension; into ``allocate(shape, dtype)``'s array
    (shared memory inside a worker) when the tensors are CPU tensors of one NumPy-compatible
    dtype, so the batch is written once, where it will travel."""
    torch = imported_torch()
    assert torch is not None
    first = tensors[0]
    view = as_shareable_array(first) if allocate is not None else None
    if (
        allocate is not None
        and view is not None
        and all(
            t.dtype == first.dtype and t.device == first.device and not t.requires_grad
            for t in tensors
        )
    ):
        out = torch.from_numpy(allocate((len(tensors), *first.shape), view.dtype))
        return torch.stack(list(tensors), 0, out=out)
    return torch.stack(list(tensors), 0)


def accelerator_available(import_torch: bool = False) -> bool:
    """Whether CUDA is usable; ``import_torch`` imports torch first if it is not yet."""
    torch = require_torch() if import_torch else imported_torch()
    return torch is not None and bool(torch.cuda.is_available())


# dtype kinds torch.from_numpy takes: bool, signed and unsigned ints, floats, complex.
_TENSOR_KINDS = frozenset("biufc")


def to_tensor(array: Any) -> Any:
    """``torch.from_numpy``: the tensor shares the array's memory (no copy). An array torch
    cannot hold (strings, bytes, a dtype this torch lacks) stays an array, as torch's
    DataLoader leaves it."""
    torch = require_torch()  # output="torch" without the program importing torch first
    if array.dtype.kind not in _TENSOR_KINDS:
        return array
    try:
        return torch.from_numpy(array)
    except TypeError:
        return array


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
