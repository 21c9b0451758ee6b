"""Token corpora for language models (``flowloader.text``; NumPy only): documents of flat
token files (:class:`TokenDataset`), nanoGPT-style windows (:class:`TokenWindows`), the writer
(:func:`write_tokens`), and documents packed into fixed-length rows (:class:`Packed`,
:func:`collate_packed`). See docs/design/text.md."""

from .collate import block_diagonal_mask, collate_packed
from .packed import Packed
from .tokens import TokenDataset
from .windows import TokenWindows
from .writer import write_tokens

__all__ = [
    "Packed",
    "TokenDataset",
    "TokenWindows",
    "block_diagonal_mask",
    "collate_packed",
    "write_tokens",
]
