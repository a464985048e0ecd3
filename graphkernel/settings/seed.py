"""The global seed (MindSpore's `set_seed`): one numpy Generator the initializers draw from, so a network
built after `set_seed(s)` has the same weights on every run."""
from __future__ import annotations

import numpy as np

_state = {"seed": None, "generator": np.random.default_rng()}
_on_set_seed: list = []   # callbacks: state that restarts with the seed (the dropout generator's offset)


def on_set_seed(callback) -> None:
    _on_set_seed.append(callback)


def set_seed(seed: int) -> None:
    """Seed the initializers' generator (a non-negative int, as MindSpore requires)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"set_seed: seed must be a non-negative int, got {seed!r}")
    _state["seed"] = seed
    _state["generator"] = np.random.default_rng(seed)
    for callback in _on_set_seed:
        callback()


def get_seed() -> int | None:
    return _state["seed"]


def generator() -> np.random.Generator:
    return _state["generator"]
