"""The names of ``torch.utils.data``, so ported code only changes its import line."""

from .. import *  # noqa: F403
from .. import __all__ as __all__
