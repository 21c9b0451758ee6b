"""Optional JAX bridge: batches as JAX arrays (imported only when asked for)."""

from __future__ import annotations

from typing import Any


def to_array(array: Any) -> Any:
    """A JAX array on the default device (a copy: JAX owns its buffers)."""
    import jax.numpy as jnp

    return jnp.asarray(array)
