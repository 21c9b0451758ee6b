"""Token sources for the packed-rows tests, whose every token says where it comes from:
token = document * 1024 + position, documents numbered across the sources."""

from __future__ import annotations

import numpy as np

import flowloader as fl
from flowloader.text import Packed, TokenDataset, write_tokens

SPREAD = 1024  # more than any document's length


def write_sources(directory: str, tokens: int, seed: int = 0) -> list[TokenDataset]:
    """Three token files of about ``tokens`` tokens in all (log-normal document lengths)."""
    rng = np.random.default_rng(seed)
    sources, first_doc = [], 0
    for k in range(3):
        lengths = np.minimum(rng.lognormal(5.5, 0.6, size=tokens // 3 // 280 + 1), SPREAD - 1)
        docs = [(first_doc + d) * SPREAD + np.arange(int(n) + 1) for d, n in enumerate(lengths)]
        first_doc += len(docs)
        sources.append(TokenDataset(write_tokens(docs, f"{directory}/s{k}.bin", dtype="uint32")))
    return sources


def packed_rows(sources: list[TokenDataset], seq_len: int, mixture: bool) -> Packed:
    if mixture:
        named = {f"s{k}": source for k, source in enumerate(sources)}
        dataset = fl.Mixture(named, [0.5, 0.3, 0.2])  # ends before any source is read twice
    else:
        dataset = fl.ConcatDataset(sources)
    return Packed(dataset, seq_len, block=256)


def every_token(sources: list[TokenDataset], mixture: bool) -> list[int]:
    """The tokens an epoch must hold, each once (a Mixture's: those of its positions)."""
    if not mixture:
        return sorted(np.concatenate([s[i] for s in sources for i in range(len(s))]).tolist())
    named = {f"s{k}": source for k, source in enumerate(sources)}
    mix = fl.Mixture(named, [0.5, 0.3, 0.2])
    return sorted(np.concatenate([mix[i] for i in range(len(mix))]).tolist())


def row_tokens(batch: dict) -> list[int]:
    """The real (not padding) tokens of a batch of rows."""
    tokens, segments = np.asarray(batch["tokens"]), np.asarray(batch["segment_ids"])
    return tokens[segments > 0].tolist()
