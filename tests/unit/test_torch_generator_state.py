"""A torch.Generator's state in a checkpoint: its short forms give back the very bytes."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from flowloader._compat import torch_generator_state  # noqa: E402


def round_trip(generator) -> dict | str:
    state = generator.get_state().numpy()
    saved = json.loads(json.dumps(torch_generator_state.encode(state)))
    assert np.array_equal(torch_generator_state.decode(saved), state)
    restored = torch.Generator()
    restored.set_state(torch.from_numpy(torch_generator_state.decode(saved)))
    assert torch.equal(torch.rand(5, generator=restored), torch.rand(5, generator=generator))
    return saved


@pytest.mark.parametrize("words", [0, 1, 2, 7, 624, 625, 1300, 4 * 624 - 1])
def test_a_seeded_generator_is_its_seed_and_the_words_drawn(words) -> None:
    generator = torch.Generator().manual_seed(2**63 + 12345)  # a seed over int64 too
    for _ in range(words % 2):  # an int32 draw takes one word...
        torch.empty(1, dtype=torch.int32).random_(generator=generator)
    for part in (words // 4, words // 2 - words // 4):  # ...an int64 draw two, in any pieces
        torch.empty(part, dtype=torch.int64).random_(generator=generator)
    assert round_trip(generator) == {"seed": 2**63 + 12345, "words": words}


@pytest.mark.parametrize(
    "use",
    [
        lambda g: torch.empty(10_000, dtype=torch.int64).random_(generator=g),  # past the bound
        lambda g: torch.randn(3, generator=g),  # a cached normal sample in the tail
        lambda g: torch.randperm(50_000, generator=g),
    ],
)
def test_any_other_cpu_generator_is_packed_in_2560_bytes(use) -> None:
    generator = torch.Generator().manual_seed(4)
    use(generator)
    saved = round_trip(generator)
    assert set(saved) == {"packed"}
    assert len(base64.b64decode(saved["packed"])) == 2560


def test_states_of_other_sizes_and_earlier_forms_still_load() -> None:
    odd = np.arange(16, dtype=np.uint8)  # a CUDA generator's (seed, offset), say
    assert np.array_equal(torch_generator_state.decode(torch_generator_state.encode(odd)), odd)
    state = torch.Generator().manual_seed(8).get_state().numpy()
    whole = base64.b64encode(state.tobytes()).decode("ascii")  # as saved before the short forms
    assert np.array_equal(torch_generator_state.decode(whole), state)
    assert np.array_equal(torch_generator_state.decode(state.tolist()), state)  # older still
