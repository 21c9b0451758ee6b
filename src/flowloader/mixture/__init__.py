"""Weighted mixtures of map-style datasets, with curricula: ``flowloader.Mixture``."""

from .batch_sampler import MixtureBatchSampler
from .dataset import Mixture

__all__ = ["Mixture", "MixtureBatchSampler"]
