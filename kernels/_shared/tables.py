"""Launch choices as data: a kernel's table (``kernels/<name>/table.py``) holds one Choice per entry, and the swap
tracking that keeps the launch caches honest when a test or the lab swaps a table.

Each Choice holds the value a kernel reads, a one-line reason and its evidence: the lab CSV (data/tuning/<file>) that
measured it, or None for a rule of thumb no tune run decided. The decisions behind the entries are in
docs/decisions.md. Kernels read the bare values through ``values`` into module attributes of the same names
(``kernels.layernorm.UNMASKED_COLS``), which tests and the lab (python -m lab) swap.

Keys: an element size in bytes (2: bfloat16 and float16, 4: float32) or a dtype name. Row tables give, per key,
(columns, warps): rows of at least that many columns take at least that many warps; or (fewest, most) columns.
"""
from __future__ import annotations

import sys
import types
from typing import Any, NamedTuple

T = "data/tuning/"
VERSION = 0  # the table version: every launch cache key holds it (kernels/_shared/fastlaunch.py)


class Choice(NamedTuple):
    value: Any
    reason: str
    evidence: str | None  # data/tuning/<file>.csv, or None: no tune run decided it


def values(table):
    """The bare values a kernel reads: {key: value} for a table of Choices, the value for one Choice."""
    return table.value if isinstance(table, Choice) else {k: c.value for k, c in table.items()}


class _Tracked(types.ModuleType):

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        global VERSION
        VERSION += 1


def track_swaps(module_name: str) -> None:
    """Make every attribute set on the module from outside (a test or the lab swapping a table, a recorder standing
    in for a kernel) a new table VERSION, so no launch cache replays a plan made with the old value. A module's own
    code never sets its attributes so; a table changed in place is not seen: swap it, never mutate it."""
    sys.modules[module_name].__class__ = _Tracked
