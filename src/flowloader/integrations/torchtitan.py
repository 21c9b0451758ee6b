"""A data loader for torchtitan's trainer: packed token rows over a mixture of token files,
dealt out by data-parallel rank, checkpointed so that it resumes on another data-parallel
degree (torchtitan's own loaders refuse one).

``PackedDataLoader`` is torchtitan's ``BaseDataLoader`` (a DCP ``Stateful`` and a
``Configurable``): put ``PackedDataLoader.Config(...)`` where the trainer's config takes its
``dataloader``, and the trainer builds it with ``dp_world_size``, ``dp_rank``, ``seq_len`` and
``local_batch_size`` as it builds its own. Each batch is ``({"input": tokens, "positions":
positions}, labels)``, int64 tensors of shape ``(local_batch_size, seq_len)``: rows of
``flowloader.text.Packed`` over a ``flowloader.Mixture`` of ``TokenDataset`` files, positions
restarting at 0 in each document, and each label the next token of the same document
(``-100``, torchtitan's ignore index, at a document's last token and at padding). The loader
ends (``StopIteration``, which the trainer turns into its ``DataloaderExhaustedError``) after
one epoch unless ``infinite=True`` (the default, as torchtitan's text loaders).

Its state is :class:`flowloader.integrations.dcp.Stateful`'s fixed form, the same on every
rank, so DCP keeps one copy and a checkpoint restores on any number of data-parallel ranks:
the rows not yet delivered are dealt out over the new ranks.

torchtitan and torch are imported where the class is first used (``import flowloader`` and
this module import neither); without torchtitan, that use raises ImportError naming
``pip install torchtitan``."""

from __future__ import annotations

from typing import Any

import numpy as np

# PackedDataLoader is built by the module's __getattr__ on first use, and so is not in
# __all__: the API reference, generated from __all__ where torchtitan is not installed,
# describes it in this module's docstring instead.
__all__ = ["IGNORE_INDEX", "labeled_rows"]

#: torchtitan's ignore index (torchtitan.components.loss.IGNORE_INDEX): no loss at this label
IGNORE_INDEX = -100
_LAZY = ("PackedDataLoader",)
_built: dict[str, type] = {}


def labeled_rows(rows: list[dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Packed rows as torchtitan's batch: ``({"input", "positions"}, labels)``, int64 arrays
    of shape ``(rows, seq_len)``; a label is the next token of the same document, else
    ``IGNORE_INDEX`` (a document's last token, padding)."""
    tokens = np.stack([row["tokens"] for row in rows]).astype(np.int64)
    segments = np.stack([row["segment_ids"] for row in rows])
    positions = np.stack([row["positions"] for row in rows]).astype(np.int64)
    labels = np.full_like(tokens, IGNORE_INDEX)
    same = (segments[:, 1:] == segments[:, :-1]) & (segments[:, :-1] > 0)
    labels[:, :-1][same] = tokens[:, 1:][same]
    return {"input": tokens, "positions": positions}, labels


def __getattr__(name: str) -> Any:
    """``PackedDataLoader``, built on torchtitan's ``BaseDataLoader`` when first asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _built:
        _built[name] = _build_class()
    return _built[name]


def _torchtitan_base() -> type:
    try:
        from torchtitan.components.dataloader import BaseDataLoader
    except ImportError as error:
        raise ImportError(
            "flowloader.integrations.torchtitan.PackedDataLoader needs torchtitan and the torch "
            f"it requires: pip install torchtitan (importing it failed: {error})"
        ) from error
    return BaseDataLoader


def _build_class() -> type:
    """The loader class, subclassing the installed torchtitan's ``BaseDataLoader``."""
    import dataclasses

    base: Any = _torchtitan_base()

    class PackedDataLoader(base):
        """torchtitan's data loader over packed token rows (see the module): built by the
        trainer from its ``Config``; a DCP ``Stateful`` that resumes on any data-parallel
        degree."""

        @dataclasses.dataclass(kw_only=True, slots=True)
        class Config(base.Config):
            """What the loader reads and how (the trainer adds the rank, the world, the
            sequence length and the batch size)."""

            sources: dict[str, str] = dataclasses.field(default_factory=dict)
            """Token files (``flowloader.text.TokenDataset`` paths) by source name."""
            weights: Any = None
            """The Mixture's weights (by name or in order) or schedule; None: equal."""
            stopping: str = "first_exhausted"
            """When an epoch of the Mixture ends (``flowloader.Mixture``'s ``stopping``)."""
            num_samples: int | None = None
            """Documents per epoch, where ``stopping`` needs or caps it."""
            block: int = 4096
            """Documents packed together (``Packed``'s ``block``)."""
            pad_id: int = 0
            """The token that fills a row's end."""
            shuffle: bool = True
            """Rows in a seeded order per epoch (the ``DistributedSampler``'s)."""
            seed: int = 0
            """Seeds the Mixture, the row order and the loader's generator."""
            infinite: bool = True
            """Start the next epoch where one ends (else end after one)."""
            num_workers: int = 0
            """flowloader workers (any number: the state does not depend on it)."""
            worker_method: str | None = None
            """``"multiprocessing"`` (default with workers) or ``"thread"``."""

        def __init__(
            self,
            config: Any,
            *,
            dp_world_size: int,
            dp_rank: int,
            seq_len: int,
            local_batch_size: int,
            tokenizer: Any = None,
            snapshot_every_n_steps: int | None = None,
            **kwargs: Any,
        ) -> None:
            # tokenizer: the files hold token ids already; snapshots: a state costs nothing
            self.config, self.dp_rank, self.dp_world_size = config, dp_rank, dp_world_size
            self.loader = _flow_loader(config, dp_world_size, dp_rank, seq_len, local_batch_size)

        def __iter__(self) -> Any:
            """Batches ``({"input", "positions"}, labels)`` of torch int64 tensors, epoch
            after epoch while ``infinite``."""
            while True:
                yield from self.loader
                if not self.config.infinite:
                    return

        def state_dict(self) -> dict[str, Any]:
            """The loader's position in DCP's fixed form (collective under
            torch.distributed: every rank calls it, as ``dcp.save`` does)."""
            from .dcp import Stateful

            return Stateful(self.loader).state_dict()

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            """Continue from ``state_dict`` (saved on any data-parallel degree); an empty
            one, as torchtitan allows, leaves the loader where it is."""
            if state_dict:
                self.loader.load_state_dict(state_dict)

    PackedDataLoader.__module__ = __name__
    PackedDataLoader.__qualname__ = "PackedDataLoader"
    return PackedDataLoader


def _flow_loader(config: Any, world: int, rank: int, seq_len: int, batch_size: int) -> Any:
    """The flowloader DataLoader behind the torchtitan class: Packed rows of a Mixture of
    token files, dealt out by our DistributedSampler for this data-parallel rank."""
    from .. import DataLoader, DistributedSampler, Mixture
    from ..text import Packed, TokenDataset

    if not config.sources:
        raise ValueError("PackedDataLoader.Config.sources is empty: give {name: token file}")
    sources = {name: TokenDataset(path) for name, path in config.sources.items()}
    weights = config.weights if config.weights is not None else [1.0] * len(sources)
    mixture = Mixture(
        sources,
        weights,
        seed=config.seed,
        stopping=config.stopping,
        num_samples=config.num_samples,
    )
    rows = Packed(mixture, seq_len, block=config.block, pad_id=config.pad_id)
    sampler = DistributedSampler(
        rows, num_replicas=world, rank=rank, shuffle=config.shuffle, seed=config.seed
    )
    return DataLoader(
        rows,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=labeled_rows,
        num_workers=config.num_workers,
        worker_method=config.worker_method,
        generator=config.seed,
        output="torch",
    )
