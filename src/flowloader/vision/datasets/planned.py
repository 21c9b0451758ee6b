"""The base of the image datasets that decode one file per sample (DatasetFolder,
ImageShards): every sample goes through the transform's plan, and a batch is converted
straight into one array."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from flowloader import stats
from flowloader.batching import (
    Allocate,
    CollatedSamples,
    allocate_empty,
    load_one_by_one,
    overrides_getitem,
)
from flowloader.randomness import SampleRngs, sample_context

from ..plan import BatchWriter, Plan, _pixels_hwc, plan_for
from .vision import VisionDataset


class PlannedImageDataset(VisionDataset):
    """Samples (image, int target); a subclass says how to read sample ``index`` through a
    plan's head (:meth:`_load`)."""

    def _load(
        self, index: int, plan: Plan, rng: Any, contents: bytes | None = None
    ) -> tuple[Any, int]:
        """Sample ``index``'s image after ``plan``'s head, and its target; errors say which
        sample and where it is stored. ``contents``: its file's bytes, when
        :meth:`_read_ahead` has read them."""
        raise NotImplementedError

    def _read_ahead(self, indices: Sequence[int]) -> Iterator[bytes | None]:
        """Each sample's file contents for :meth:`_load`, read ahead a batch at a time where
        a subclass can; None where ``_load`` reads it itself."""
        return itertools.repeat(None)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        plan = plan_for(self.transform)
        image, target = self._load(index, plan, None)
        with stats.stage("transform"):
            sample = plan.finish(image)
            if self.target_transform is not None:
                target = self.target_transform(target)
        return sample, target

    def __getitems__(
        self,
        indices: list[int],
        rngs: Sequence[Any] | None = None,
        allocate: Allocate = allocate_empty,
    ) -> Any:
        """A batch, bit-identical to ``[self[i] for i in indices]``; ``rngs[k]`` is sample
        k's generator. When the plan takes the whole pipeline on a stack
        (:meth:`~flowloader.vision.plan.Plan.stack_plan`) and the decoded images share one
        size, it runs on their stack; else, when the transform ends in a conversion, each
        image is converted straight into one batch array from ``allocate`` (in a DataLoader
        worker process, the shared memory the batch travels in): no per-sample array, and
        nothing left for collate to copy. See :mod:`flowloader.batching`."""
        plan = plan_for(self.transform)
        if overrides_getitem(self, PlannedImageDataset) or self.target_transform is not None:
            return load_one_by_one(self, indices, rngs)
        generators = _generators(plan, rngs)
        # A leading geometry plans each file's decode (the native kernel, a reduced scale):
        # such pipelines keep their per-image path, whose results those decodes define.
        if plan.batchable and plan.geometry is None and not self._sizes_vary:
            stacked = self._decoded_and_stacked(indices, plan, rngs, generators, allocate)
            if stacked is not None:
                return stacked
        if plan.conversion is None:
            return load_one_by_one(self, indices, rngs)
        seeds = rngs.seeds if isinstance(rngs, SampleRngs) else None
        writer = BatchWriter(plan, len(indices), allocate)
        targets: list[Any] = [None] * len(indices)
        contents = _until_it_fails(self._read_ahead(indices))
        try:
            for k, index in enumerate(indices):
                rng = None if generators is None else generators[k]
                # for code that asks flowloader.sample_rng() (made then, when rng is None)
                with sample_context(index, rng, seeds):
                    image, targets[k] = self._load(index, plan, rng, next(contents))
                    with stats.stage("transform"):
                        writer.add(image, rng)
            with stats.stage("transform"):
                images = writer.result()
        except Exception:
            writer.flush()  # an earlier sample's error comes first
            raise
        if isinstance(images, list):  # the images did not fit one array
            return list(zip(images, targets, strict=True))
        return CollatedSamples((images, _stacked(targets)), lambda k: (images[k], targets[k]))

    # Set once a batch's decoded images were not 8-bit images of one size the batch plan
    # takes: it is not tried again (each try decodes the batch before it knows).
    _sizes_vary = False

    def _decoded_and_stacked(
        self,
        indices: list[int],
        plan: Plan,
        rngs: Sequence[Any] | None,
        generators: Sequence[Any] | None,
        allocate: Allocate,
    ) -> CollatedSamples | None:
        """The batch through the batch plan after decoding (:mod:`..stack_plan`): every
        image decoded as the per-sample path decodes it (there is no geometry to plan the
        decode with), then the whole pipeline on their stack. None, with nothing drawn, when the
        images are not 8-bit images of one size: the batch is then loaded image by image."""
        bare = plan_for(None)
        seeds = rngs.seeds if isinstance(rngs, SampleRngs) else None
        contents = _until_it_fails(self._read_ahead(indices))
        pixels: list[np.ndarray] = []
        targets: list[Any] = []
        for k, index in enumerate(indices):
            rng = None if generators is None else generators[k]
            with sample_context(index, rng, seeds):
                image, target = self._load(index, bare, rng, next(contents))
            found = _pixels_hwc(image)
            if found is None:  # not an 8-bit image
                self._sizes_vary = True
                return None
            pixels.append(found)
            targets.append(target)
        shapes = {p.shape for p in pixels}
        stack = plan.stack_plan(shapes.pop()) if len(shapes) == 1 else None
        if stack is None:
            self._sizes_vary = True
            return None
        with stats.stage("transform"):
            images = stack.run(np.stack(pixels), rngs, allocate, indices)
        return CollatedSamples((images, _stacked(targets)), lambda k: (images[k], targets[k]))


def _stacked(targets: list[Any]) -> Any:
    """The batch's targets as default_collate gives them: int64 for class indices, the list
    itself for other values (an image-text table's captions)."""
    if all(type(target) is int for target in targets):
        return np.array(targets, dtype=np.int64)
    return targets


def _until_it_fails(contents: Iterator[bytes | None]) -> Iterator[bytes | None]:
    """The files read ahead, and None from the first read that raises (a file too big to
    hold, say) on: each of those samples then reads its own file, whose error names it."""
    with contextlib.suppress(Exception):
        yield from contents
    while True:
        yield None


def _generators(plan: Plan, rngs: Sequence[Any] | None) -> Sequence[Any] | None:
    """The samples' generators as the batch loop asks for them. From the loader's seeds:
    none when no step draws (a load that asks ``flowloader.sample_rng()`` still gets its
    own), and one generator reset per sample when only the plan's own steps draw from it
    (the kernel's path). Generators handed in as they are: those."""
    if not isinstance(rngs, SampleRngs):
        return rngs
    if not plan.draws:
        return None
    return rngs.one_at_a_time() if plan.native_ready else rngs
