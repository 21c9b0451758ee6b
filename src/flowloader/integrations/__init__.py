"""Adapters that let training frameworks' checkpointers save a loader's position: one module
per framework, each importing its framework only when it is imported itself (``import
flowloader`` imports none of them).

- :mod:`flowloader.integrations.dcp`: ``torch.distributed.checkpoint`` (torchtitan's way).
- :mod:`flowloader.integrations.orbax`: Orbax's ``CheckpointManager`` and Grain's handler.
- :mod:`flowloader.integrations.torchtitan`: a data loader torchtitan's trainer builds from its
  config (packed token rows over a mixture), resuming on another data-parallel degree.
"""

from __future__ import annotations

__all__: list[str] = []
