"""The weighted interleave of one stage: which source takes mixture position t, as pure
integer arithmetic, for any t without computing the positions before it.

The sources are the leaves of a binary tree built as a Huffman code is (the two lightest
nodes merged first). Every internal node splits the positions that reach it between its two
children with a Beatty sequence: of the first N positions that reach a node of weight b
whose left child weighs a, the left child takes ``floor(N·a/b + 1/2)``, the right child the
rest. A source's count among the first t positions is the composition of these floors along
its path from the root, so it never decreases, the counts always sum to t, and each step
adds at most 1/2 to the error, shrunk by the ratios below it:

    |count_s(t) - t·w_s| <= 1/2 · (1 + p_1 + p_1·p_2 + ...)

where p_1 is the source's share of its parent, p_2 the parent's share of its own parent, and
so on. In a Huffman tree an internal node's share of its parent is at most 2/3 (its sibling
was never lighter than the heavier of its own two children), so the sum is below
1 + 3·p_1 <= 4, and every prefix of every stage is within 2 of its proportion, whatever the
number of sources and however uneven their weights (docs/design/mixtures.md).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

# Weights are integers summing to this: exact arithmetic, and ``2·r·a + b`` (r < b, a <= b)
# stays below 2**63 in NumPy's int64.
UNITS = 1 << 31


def beatty(n: np.ndarray | int, a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray | int:
    """``floor(n·a/b + 1/2)`` without overflow: how many of the first ``n`` positions reaching
    a node of weight ``b`` go to its left child of weight ``a``."""
    q, r = divmod(n, b)
    return q * a + (2 * r * a + b) // (2 * b)


@dataclass(frozen=True)
class Interleave:
    """One stage's tree. Row k of ``table`` is internal node k: its left child's weight, its
    weight, its left child and its right child (a child c < 0 is the leaf of source
    ``-c - 1``); ``root`` is an internal node, or a leaf when one source has all the weight."""

    root: int
    table: np.ndarray
    # For each source with weight: the steps from its leaf up to the root, as
    # (node weight, left weight, went left), used to invert the counts.
    paths: dict[int, tuple[tuple[int, int, bool], ...]]
    # The table as locate reads it: a, b, 2b, 2(b - a), left, right.
    _walk_table: np.ndarray

    @classmethod
    def build(cls, units: list[int], names: list[str] | None = None) -> Interleave:
        """The tree over the sources with ``units[s] > 0`` (integers, summing to UNITS).
        Equal weights are ordered by ``names`` (default: the source numbers), so that the
        tree, and every position, does not depend on the order the sources were listed in."""
        keys = names if names is not None else [f"{s:09d}" for s in range(len(units))]
        heap = [(u, keys[s], -s - 1) for s, u in enumerate(units) if u > 0]
        heapq.heapify(heap)
        left: list[int] = []
        right: list[int] = []
        weight: list[int] = []
        left_weight: list[int] = []
        while len(heap) > 1:
            # The lighter of the two goes right: ties break by the smallest key.
            light, light_key, light_node = heapq.heappop(heap)
            heavy, heavy_key, heavy_node = heapq.heappop(heap)
            left.append(heavy_node)
            right.append(light_node)
            weight.append(light + heavy)
            left_weight.append(heavy)
            heapq.heappush(heap, (light + heavy, min(light_key, heavy_key), len(weight) - 1))
        table = np.array([left_weight, weight, left, right], dtype=np.int64).T.reshape(-1, 4)
        a, b = table[:, 0], table[:, 1]
        walk = np.stack([a, b, 2 * b, 2 * (b - a), table[:, 2], table[:, 3]], axis=1)
        tree = cls(heap[0][2], np.ascontiguousarray(table), {}, walk)
        tree.paths.update(tree._leaf_paths())
        return tree

    def _leaf_paths(self) -> dict[int, tuple[tuple[int, int, bool], ...]]:
        paths: dict[int, tuple[tuple[int, int, bool], ...]] = {}
        stack: list[tuple[int, tuple[tuple[int, int, bool], ...]]] = [(self.root, ())]
        while stack:
            node, above = stack.pop()
            if node < 0:
                paths[-node - 1] = above
                continue
            a, b, left, right = self.table[node].tolist()
            stack.append((left, ((b, a, True), *above)))
            stack.append((right, ((b, a, False), *above)))
        return paths

    def counts(self, t: int) -> dict[int, int]:
        """How many of the first ``t`` positions each source takes."""
        out: dict[int, int] = {}
        stack = [(self.root, t)]
        while stack:
            node, n = stack.pop()
            if node < 0:
                out[-node - 1] = n
                continue
            a, b, left, right = self.table[node].tolist()
            taken = int(beatty(n, a, b))
            stack.append((left, taken))
            stack.append((right, n - taken))
        return out

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source, how many earlier positions that source took) for each position, all at
        once: one pass down the tree per level, over the positions still at an inner node."""
        n = len(positions)
        sources = np.empty(n, dtype=np.int64)
        if self.root < 0:
            sources.fill(-self.root - 1)
            return sources, positions.astype(np.int64, copy=True)
        ranks = positions.astype(np.int64, copy=True)
        nodes = np.full(n, self.root, dtype=np.int64)
        active = np.arange(n)
        table = self._walk_table
        while active.size:
            rank = ranks[active]
            row = table[nodes[active]]  # one gather: a, b, 2b, 2(b - a), left, right
            a = row[:, 0]
            # rank = q·b + r; before = beatty(rank) = q·a + floor((2ra + b) / 2b), and the
            # position goes left iff beatty(rank + 1) > before, i.e. iff the remainder of that
            # division is at least 2(b - a)
            q, r = np.divmod(rank, row[:, 1])
            d, remainder = np.divmod(2 * (r * a) + row[:, 1], row[:, 2])
            before = q * a + d
            goes_left = remainder >= row[:, 3]
            ranks[active] = np.where(goes_left, before, rank - before)
            child = np.where(goes_left, row[:, 4], row[:, 5])
            at_leaf = child < 0
            if at_leaf.any():
                sources[active[at_leaf]] = -child[at_leaf] - 1
                inner = ~at_leaf
                nodes[active[inner]] = child[inner]
                active = active[inner]
            else:
                nodes[active] = child
        return sources, ranks

    def position_of(self, source: int, k: int) -> int:
        """The position (from the stage's start) of the ``k``-th (0-based) draw of ``source``:
        the inverse of its count, node by node up the path, in Python's exact integers (a
        tiny weight's far draws lie past anything int64 holds)."""
        m = k
        for b, a, went_left in self.paths[source]:
            # the smallest m' whose first m'+1 positions send m+1 items to that side
            m = (
                -(-b * (2 * m + 1) // (2 * a)) - 1
                if went_left
                else b * (2 * m + 1) // (2 * (b - a))
            )
        return m

    def positions_of(self, source: int, ks: np.ndarray) -> np.ndarray:
        """``position_of`` for many draws of one source at once."""
        m = ks.astype(np.int64, copy=True)
        for b, a, went_left in self.paths[source]:
            # The smallest m' whose first m'+1 positions send m+1 items to that side: on the
            # left ceil(b·x / 2a) - 1, on the right floor(b·x / 2(b-a)), x = 2m+1; x is split
            # by the divisor so that no product passes 2**63.
            divisor = 2 * a if went_left else 2 * (b - a)
            q, r = np.divmod(2 * m + 1, divisor)
            m = q * b + (-(-b * r // divisor) - 1 if went_left else b * r // divisor)
        return m
