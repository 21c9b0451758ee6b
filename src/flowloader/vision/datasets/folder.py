"""DatasetFolder and ImageFolder with torchvision's semantics and compact sample storage.

The (path, class) list lives in three NumPy arrays (UTF-8 path bytes, offsets, targets), not
in a list of tuples: forked workers then share it instead of copying it page by page as
reference counts are touched (pytorch#13246). ``samples``, ``imgs`` and ``targets`` still read
(and can be assigned) as torchvision's lists.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from .. import decode, native
from ..decode import located
from ..plan import Plan
from .planned import PlannedImageDataset
from .vision import checked_targets

#: The file extensions ImageFolder reads as images (matched ignoring case).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_file_allowed_extension(filename: str, extensions: str | tuple[str, ...]) -> bool:
    """Whether ``filename`` ends with one of ``extensions``, ignoring case (torchvision's)."""
    return filename.lower().endswith(
        extensions if isinstance(extensions, str) else tuple(extensions)
    )


def find_classes(directory: str | Path) -> tuple[list[str], dict[str, int]]:
    """The sorted names of the class folders in ``directory`` and their indices."""
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {name: i for i, name in enumerate(classes)}


def make_dataset(
    directory: str | Path,
    class_to_idx: dict[str, int] | None = None,
    extensions: str | tuple[str, ...] | None = None,
    is_valid_file: Callable[[str], bool] | None = None,
    allow_empty: bool = False,
) -> list[tuple[str, int]]:
    """(path, class index) for every valid file under each class folder, sorted."""
    directory = os.path.expanduser(str(directory))
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    elif not class_to_idx:
        raise ValueError("'class_to_index' must have at least one entry to collect any samples.")
    if (extensions is None) == (is_valid_file is None):
        raise ValueError(
            "Both extensions and is_valid_file cannot be None or not None at the same time"
        )
    if extensions is not None:
        allowed = extensions

        def is_valid_file(path: str) -> bool:
            return has_file_allowed_extension(path, allowed)

    assert is_valid_file is not None
    instances: list[tuple[str, int]] = []
    found: set[str] = set()
    for class_name in sorted(class_to_idx):
        class_dir = os.path.join(directory, class_name)
        if not os.path.isdir(class_dir):
            continue
        for root, _, names in sorted(os.walk(class_dir, followlinks=True)):
            for name in sorted(names):
                path = os.path.join(root, name)
                if is_valid_file(path):
                    instances.append((path, class_to_idx[class_name]))
                    found.add(class_name)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        message = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            listed = extensions if isinstance(extensions, str) else ", ".join(extensions)
            message += f"Supported extensions are: {listed}"
        raise FileNotFoundError(message)
    return instances


class SampleTable(Sequence):
    """(path, target) pairs stored as flat arrays; reads like a list of tuples."""

    def __init__(self, samples: Iterable[tuple[str, int]]) -> None:
        encoded: list[bytes] = []
        targets: list[int] = []
        for path, target in samples:
            encoded.append(os.fsencode(path))
            targets.append(int(target))
        lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
        self.offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        self.blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self.targets = np.asarray(targets, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.targets)

    def path(self, index: int) -> str:
        start, end = self.offsets[index], self.offsets[index + 1]
        return os.fsdecode(self.blob[start:end].tobytes())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        index = range(len(self))[index]
        return self.path(index), int(self.targets[index])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"SampleTable({len(self)} samples)"


def pil_loader(path: str | Path) -> Image.Image:
    return decode.open_rgb(str(path))


def default_loader(path: str | Path) -> Any:
    """Open an image file as an RGB PIL image."""
    return pil_loader(path)


# The most file bytes read ahead at once: a batch of 64 ImageNet-sized files (some 7 MB) is
# one read; camera photos (1.2 MB each) take several, so a batch's files are never all held
# on top of the bytes the batch's kernel call holds (plan.WAITING_BYTES).
READ_AHEAD_BYTES = 16 << 20


def _read_in_chunks(paths: list[str]) -> Iterator[bytes | None]:
    start = 0
    while start < len(paths):
        contents = native.read_files(paths[start:], READ_AHEAD_BYTES)
        start += len(contents)  # at least one: the loop ends
        yield from contents


class DatasetFolder(PlannedImageDataset):
    """Samples in ``root/<class>/.../<file>``, loaded by ``loader``; see torchvision."""

    def __init__(
        self,
        root: str | Path,
        loader: Callable[[str], Any],
        extensions: tuple[str, ...] | None = None,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        is_valid_file: Callable[[str], bool] | None = None,
        allow_empty: bool = False,
        *,
        reduced_decode: bool = True,
    ) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.reduced_decode = reduced_decode
        if self.root is None:
            raise TypeError(f"{type(self).__name__} needs a root directory, got None")
        classes, class_to_idx = self.find_classes(self.root)
        samples = self.make_dataset(
            self.root,
            class_to_idx=class_to_idx,
            extensions=extensions,
            is_valid_file=is_valid_file,
            allow_empty=allow_empty,
        )
        self.loader = loader
        self.extensions = extensions
        self.classes = classes
        self.class_to_idx = class_to_idx
        self.samples = samples

    @staticmethod
    def make_dataset(
        directory: str | Path,
        class_to_idx: dict[str, int],
        extensions: tuple[str, ...] | None = None,
        is_valid_file: Callable[[str], bool] | None = None,
        allow_empty: bool = False,
    ) -> list[tuple[str, int]]:
        if class_to_idx is None:
            raise ValueError("The class_to_idx parameter cannot be None.")
        return make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty)

    def find_classes(self, directory: str | Path) -> tuple[list[str], dict[str, int]]:
        return find_classes(directory)

    @property
    def samples(self) -> SampleTable:
        return self._table

    @samples.setter
    def samples(self, samples: Iterable[tuple[str, int]]) -> None:
        self._table = samples if isinstance(samples, SampleTable) else SampleTable(samples)

    imgs = samples

    @property
    def targets(self) -> list[int]:
        return self._table.targets.tolist()

    @targets.setter
    def targets(self, targets: Sequence[int]) -> None:
        self._table.targets = checked_targets(targets, self._table.targets)

    def _load(
        self, index: int, plan: Plan, rng: Any, contents: bytes | None = None
    ) -> tuple[Any, int]:
        """Sample ``index`` through its plan's head (decode planned with it when the default
        loader reads the file); errors name the file."""
        path, target = self._table[index]
        try:
            if self.loader is default_loader:
                source = path if contents is None else contents
                return plan.load(source, rng, self.reduced_decode, path, index), target
            return plan.run_head(self.loader(path), rng), target
        except Exception as error:
            raise located(error, path, index) from error

    def _read_ahead(self, indices: Sequence[int]) -> Iterator[bytes | None]:
        """With the default loader and the native kernel, a batch's files read by
        :func:`native.read_files`, up to READ_AHEAD_BYTES at a time: a thread worker gives
        up the GIL twice per batch for them, not once per open, read and close. A file it
        could not read is None, and :meth:`_load` reads it (and raises its error)."""
        if self.loader is not default_loader or not native.available():
            return super()._read_ahead(indices)
        return _read_in_chunks([self._table[index][0] for index in indices])

    def __len__(self) -> int:
        return len(self._table)


class ImageFolder(DatasetFolder):
    """Images in ``root/<class>/.../<image>``, opened as RGB PIL images by default."""

    def __init__(
        self,
        root: str | Path,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        loader: Callable[[str], Any] = default_loader,
        is_valid_file: Callable[[str], bool] | None = None,
        allow_empty: bool = False,
        *,
        reduced_decode: bool = True,
    ) -> None:
        super().__init__(
            root,
            loader,
            IMG_EXTENSIONS if is_valid_file is None else None,
            transform=transform,
            target_transform=target_transform,
            is_valid_file=is_valid_file,
            allow_empty=allow_empty,
            reduced_decode=reduced_decode,
        )
