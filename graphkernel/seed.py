"""The global seed (MindSpore's `set_seed`): one numpy Generator the initializers draw from, so a network
built after `set_seed(s)` has the same weights on every run."""
from __future__ import annotations

import numpy as np

_state = {"seed": None, "generator": np.random.default_rng()}


def set_seed(seed: int) -> None:
    """Seed the initializers' generator (a non-negative int, as MindSpore requires)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    _state["seed"] = seed
    _state["generator"] = np.random.default_rng(seed)


def get_seed() -> int | None:
    return _state["seed"]


def generator() -> np.random.Generator:
    return _state["generator"]
