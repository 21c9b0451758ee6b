"""A DataLoader in Orbax checkpoints (JAX trainers), with or without Grain.

- :class:`Checkpointable` gives a loader the methods Grain's checkpoint handler calls
  (``get_state() -> bytes``, ``set_state(bytes)``, ``start_prefetch()``), so
  ``grain.checkpoint.CheckpointSave(Checkpointable(loader))`` saves it; Grain writes one
  ``process_<i>-of-<n>.json`` per JAX process and restores only onto as many processes. It
  also has Orbax v1's ``StatefulCheckpointable`` methods (async ``save`` / ``load``).
- :class:`CheckpointHandler` with :class:`CheckpointSave` / :class:`CheckpointRestore`
  (Orbax's ``CheckpointManager`` and ``ocp.args.Composite``) restores onto any number of
  processes: every process writes its state, the restore checks that the processes' shared
  parts agree, and a map-style loader with a seeded generator (and a DistributedSampler,
  which deals what is left over the new world) continues where they stopped.

Orbax and JAX are imported by this module only (``import flowloader`` imports neither);
without Orbax the classes exist but the arguments are not registered with it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from .. import _state

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave", "Checkpointable"]

try:
    import orbax.checkpoint as _ocp
except ImportError:  # the classes still document and import; Orbax cannot find the handler
    _ocp = None

_FILE = re.compile(r"flowloader_process_(\d+)-of-(\d+)\.json")


def _process() -> tuple[int, int]:
    """(this JAX process's index, the process count); (0, 1) without JAX."""
    import sys

    jax = sys.modules.get("jax")
    if jax is None:
        return 0, 1
    return jax.process_index(), jax.process_count()


class Checkpointable:
    """``loader`` with Grain's iterator checkpoint methods and Orbax v1's
    ``StatefulCheckpointable`` ones; iterating it iterates the loader."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self) -> Any:
        return iter(self.loader)

    def get_state(self) -> bytes:
        """The loader's ``state_dict()`` as UTF-8 JSON (Grain's handler decodes it)."""
        return json.dumps(self.loader.state_dict()).encode()

    def set_state(self, state: bytes) -> None:
        """Continue the loader from ``get_state()``'s bytes at its next ``iter()``."""
        self.loader.load_state_dict(json.loads(state))

    def start_prefetch(self) -> None:
        """Grain's handler calls it after ``set_state``: the loader starts its workers at
        ``iter()``, so there is nothing to start here."""

    async def save(self, directory: Any) -> Any:
        """Orbax v1: take the state now, write it (this process's file) in the background."""
        written = _files(self.loader)

        async def background() -> None:
            where = Path(await directory.await_creation())
            for name, text in written.items():
                (where / name).write_text(text)

        return background()

    async def load(self, directory: Any) -> Any:
        """Orbax v1: read the saved state (onto any process count) into the loader."""
        _restore(Path(directory), self.loader)

        async def done() -> None:
            return None

        return done()


def _files(loader: Any) -> dict[str, str]:
    """The file this process writes: its state in the fixed-key form (every process's has the
    shared part, so that a restore can check that they agree)."""
    index, count = _process()
    text = json.dumps(_state.fixed_form(loader.state_dict(), index))
    return {f"flowloader_process_{index}-of-{count}.json": text}


def _write(directory: Path, loader: Any) -> None:
    """Write this process's part of ``loader``'s state into ``directory``."""
    for name, text in _files(loader).items():
        (directory / name).write_text(text)


def _restore(directory: Path, loader: Any) -> None:
    """Continue ``loader`` from the state the processes wrote into ``directory``, on this
    process's index (another process count than the saving one's is fine where the state
    has no per-process part: a map-style loader with a seeded generator)."""
    found: dict[int, dict[str, Any]] = {}
    for path in directory.iterdir():
        match = _FILE.fullmatch(path.name)
        if match:
            found[int(match.group(1))] = json.loads(path.read_text())
    if not found:
        raise ValueError(f"{directory} holds no flowloader state (flowloader_process_*.json)")
    texts = [found[i]["state"] for i in sorted(found)]
    if len(set(texts)) > 1:
        raise ValueError(_state.shared_differences(texts, "process") + f" in {directory}")
    merged = dict(found[min(found)])
    for fixed in found.values():
        merged.update((key, value) for key, value in fixed.items() if key.startswith("rank_"))
    loader.load_state_dict(_state.from_fixed_form(merged, _process()[0]))


class CheckpointHandler:
    """Orbax's checkpoint handler for a flowloader ``DataLoader`` (or ``Checkpointable``):
    with :class:`CheckpointSave` / :class:`CheckpointRestore` in ``ocp.args.Composite``, a
    ``CheckpointManager`` saves the loader beside the model and restores it onto any number
    of JAX processes (Grain's handler needs as many as saved)."""

    def save(self, directory: Any, item: Any = None, args: Any = None) -> None:
        """Write this process's state of ``args.item`` (the loader) into ``directory``."""
        _write(Path(directory), _loader(item or args.item))

    def restore(self, directory: Any, item: Any = None, args: Any = None) -> Any:
        """Continue ``args.item`` (a loader built as the saved one) from ``directory``."""
        target = item or args.item
        _restore(Path(directory), _loader(target))
        return target

    def structure(self, directory: Any) -> None:
        """Orbax's interface: the state has no tree structure."""

    def metadata(self, directory: Any) -> None:
        """Orbax's interface: no metadata."""

    def finalize(self, directory: Any) -> None:
        """Orbax's interface: nothing to finalize."""

    def close(self) -> None:
        """Orbax's interface: nothing to close."""

    @classmethod
    def typestr(cls) -> str:
        """The name Orbax records for this handler."""
        return f"{cls.__module__}.{cls.__qualname__}"


def _loader(item: Any) -> Any:
    return item.loader if isinstance(item, Checkpointable) else item


_ArgsBase: Any = _ocp.args.CheckpointArgs if _ocp is not None else object


@dataclasses.dataclass
class CheckpointSave(_ArgsBase):
    """Orbax save argument: ``CheckpointSave(loader)`` saves the loader's state."""

    item: Any


@dataclasses.dataclass
class CheckpointRestore(_ArgsBase):
    """Orbax restore argument: ``CheckpointRestore(loader)`` continues ``loader`` (built as
    the saved one) from the saved state."""

    item: Any


if _ocp is not None:
    _ocp.args.register_with_handler(CheckpointHandler, for_save=True)(CheckpointSave)
    _ocp.args.register_with_handler(CheckpointHandler, for_restore=True)(CheckpointRestore)
