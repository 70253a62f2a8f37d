"""The verdict rules in one place: when is one implementation faster than another, and when can we not tell.

Read by the sweep's paired verdicts (analysis/paired.py), the compare table (analysis/compare.py) and the paper alike;
the settings are config key ``verdicts`` (config/schema.yaml holds every default).

A paired verdict (rooflab/paired.py times the sides in alternating rounds, so they share the clock):

    d_r      = ln(t_A,r / t_B,r)                       per round r (both sides timed in it)
    speedup  = exp(-mean d)                            A over B: above 1, A is faster
    interval = exp(-(mean d +- q * sd(d) / sqrt(R)))   q: Student's t quantile at ``level``, R - 1 degrees of freedom
    verdict  = "faster"/"slower" where the interval excludes 1 and |speedup - 1| is at least the cell's
                                 ``min_effect`` and its frame's A/A floor, however wide the interval,
               "not comparable"  otherwise, where the interval's half-width exceeds the cell's ``max_floor`` (no
                                 difference shown, but a regression of that size could hide in it),
               "tie"             otherwise.

The A/A floor: the interval covers the noise between rounds, not what differs between two set-ups of the same call
(its buffers' placement, its captured graph), which stays fixed over a session's rounds. The sweep measures that
difference on every group's twin (the builtin set up and timed twice), and a frame and size class's floor is a high
quantile (``aa_floor_quantile``) of |speedup - 1| over the run's twin pairs (analysis/paired.aa_floors).

The cell's class is its length: short (< short_cell_us), middle, long (>= long_cell_us), by the faster side's median.

Two medians timed apart (the compare table against the reference, the metrics' verdicts of cells with no paired
rounds, the A/A test's unpaired rate) take ``unpaired_verdict``: a move beyond ``k_sigma`` combined standard errors
and the class's floor (``unpaired_floor``: short cells ``short_min_rel_change``, or ``short_graph_min_rel_change`` on
CUDA-graph medians; others ``min_rel_change``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rooflab.config import schema_defaults

_DEFAULT = schema_defaults()["verdicts"]
CLASSES = ("short", "middle", "long")
TIE, FASTER, SLOWER, NOT_COMPARABLE = "tie", "faster", "slower", "not comparable"


@dataclass(frozen=True)
class VerdictRules:
    level: float = float(_DEFAULT["level"])
    short_cell_us: float = float(_DEFAULT["short_cell_us"])
    long_cell_us: float = float(_DEFAULT["long_cell_us"])
    min_effect_short: float = float(_DEFAULT["min_effect_short"])
    min_effect_middle: float = float(_DEFAULT["min_effect_middle"])
    min_effect_long: float = float(_DEFAULT["min_effect_long"])
    max_floor_short: float = float(_DEFAULT["max_floor_short"])
    max_floor_middle: float = float(_DEFAULT["max_floor_middle"])
    max_floor_long: float = float(_DEFAULT["max_floor_long"])
    aa_floor_quantile: float = float(_DEFAULT["aa_floor_quantile"])
    aa_floor_min_pairs: int = int(_DEFAULT["aa_floor_min_pairs"])
    k_sigma: float = float(_DEFAULT["k_sigma"])
    min_rel_change: float = float(_DEFAULT["min_rel_change"])
    short_min_rel_change: float = float(_DEFAULT["short_min_rel_change"])
    short_graph_min_rel_change: float = float(_DEFAULT["short_graph_min_rel_change"])

    @classmethod
    def from_config(cls, d: dict | None) -> "VerdictRules":
        d = dict(d or {})
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d and d[k] is not None})

    def size_class(self, us):
        """'short', 'middle' or 'long' for a cell of ``us`` microseconds (an array: an array of them)."""
        us = np.asarray(us, dtype=float)
        out = np.select([us < self.short_cell_us, us < self.long_cell_us], ["short", "middle"], default="long")
        return out if out.ndim else str(out)

    def min_effect(self, cls: str) -> float:
        return float(getattr(self, f"min_effect_{cls}"))

    def max_floor(self, cls: str) -> float:
        return float(getattr(self, f"max_floor_{cls}"))

    def unpaired_floor(self, short, graph):
        """The least relative change between two medians timed apart: short cells' (CUDA-graph medians: ``graph``)
        or the others'; ``short`` and ``graph`` booleans or boolean arrays."""
        short_floor = np.where(graph, self.short_graph_min_rel_change, self.short_min_rel_change)
        out = np.where(short, short_floor, self.min_rel_change)
        return out if out.ndim else float(out)


def t_quantile(level: float, dof: int) -> float:
    """The two-sided Student's t quantile: P(|T| <= q) = level."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, dof))


def paired_speedup(a_ms, b_ms, level: float = VerdictRules.level) -> dict:
    """A over B from rounds timed in pairs (a_ms[r] and b_ms[r] in round r): speedup (B's time over A's, geometric
    mean over rounds), its interval at ``level`` (lo, hi), the interval's relative half-width and the rounds used.
    NaN where fewer than two rounds have both times."""
    a, b = np.asarray(a_ms, dtype=float), np.asarray(b_ms, dtype=float)
    both = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    d = np.log(a[both]) - np.log(b[both])
    n = int(d.size)
    if n < 2:
        nan = float("nan")
        return {"speedup": nan, "lo": nan, "hi": nan, "half_width": nan, "rounds": n}
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n)
    q = t_quantile(level, n - 1) * se
    return {
        "speedup": math.exp(-mean),
        "lo": math.exp(-mean - q),
        "hi": math.exp(-mean + q),
        "half_width": math.expm1(q),
        "rounds": n
    }


def paired_verdict(speedup: float, lo: float, hi: float, half_width: float, cls: str,
                   rules: VerdictRules = VerdictRules(), aa_floor: float = 0.0) -> str:
    """The verdict of one paired comparison (see the module's docstring); '' where there is no speedup.
    ``aa_floor``: the frame and class's A/A floor (0 or NaN: none measured)."""
    if not all(map(math.isfinite, (speedup, lo, hi, half_width))):
        return ""
    least = max(rules.min_effect(cls), aa_floor if math.isfinite(aa_floor) else 0.0)
    if not lo <= 1.0 <= hi and abs(math.log(speedup)) >= math.log1p(least) - 1e-12:  # 1.03x and 1/1.03x alike
        return FASTER if speedup > 1.0 else SLOWER  # a difference shown, however wide the interval
    if half_width > rules.max_floor(cls):
        return NOT_COMPARABLE  # no difference shown, but one of the size the class must see could hide in it
    return TIE


def unpaired_verdict(speedup: float, rse_a: float, rse_b: float, floor: float,
                     k_sigma: float = VerdictRules.k_sigma) -> str:
    """The rule for two medians timed apart (each cell on its own, one after the other): faster or slower only
    where |speedup - 1| exceeds k_sigma combined standard errors and the floor. It cannot see what moved between
    the two cells (the clock): kept to show what pairing changes (the A/A test) and for cells with no paired rounds."""
    if not math.isfinite(speedup):
        return ""
    noise = max(k_sigma * math.hypot(rse_a if math.isfinite(rse_a) else 0.0, rse_b if math.isfinite(rse_b) else 0.0),
                floor)
    if speedup - 1 > noise:
        return FASTER
    if 1 - speedup > noise:
        return SLOWER
    return TIE
