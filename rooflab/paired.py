"""Paired, interleaved timing of the implementations of one cell group (kernel, dtype, shape, pass).

Why: the H200's SM clock moves with power, 1500-1980 MHz within one sweep (data/reference/h200: the matmul cells'
``sm_clock_*`` columns). Cells timed one after another each carry their own clock, so two implementations that
launch the same cuBLAS kernel (naive and builtin matmul) came out 7 % apart. Here the implementations of a group
("sides") take turns in rounds within one process: round r times every side once in each frame, in the order
A B C in even rounds and C B A in odd ones, so a clock that drifts linearly over the rounds charges every side the
same on average. Both sides of a round share the card's power and thermal state, and the per-round ratio of their
times cancels the clock; rooflab/verdicts.py turns the rounds into a ratio, a confidence interval and a verdict.

Frames, per side and round (each over the side's input placements, rooflab/timers.Rotation):

* ``gpu``: the median of ``event_samples`` samples of the sweep's timer (L2 flushed, stream held: GPU time);
* ``graph``: one replay of a CUDA graph of n calls captured once per side (CUDA-graph replay; GPU only);
* ``loop``: back-to-back calls from Python for about ``loop_ms`` (the Python loop).

Each side's turn reads the SM clock after it (``sm_clock_mhz``), so every round row says what clock it ran at, and a
loop row the process's share of the CPU over its loop (``loop_cpu_share``, rooflab/timers._loop_ms).

A/A: the group's baseline is also timed as a second side over input sets of its own (``copy`` 1): a pair known to
be identical, whose verdicts measure the method's false-positive rate (analysis/paired.py).

Rows are tidy: one per (side, copy, round, frame), with the time in ms and the clock.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rooflab.config import schema_defaults

_DEFAULT = schema_defaults()["paired"]
FRAMES = ("gpu", "graph", "loop")
ROUND_COLUMNS = [
    "kernel", "dtype", "shape", "size", "family", "preset", "pass", "session", "impl", "copy", "round", "frame", "ms",
    "sm_clock_mhz", "graph_error", "loop_cpu_share"
]


@dataclass(frozen=True)
class PairedConfig:
    enabled: bool = bool(_DEFAULT["enabled"])
    rounds: int = int(_DEFAULT["rounds"])  # rounds of every side in every frame
    min_rounds: int = int(_DEFAULT["min_rounds"])  # rounds always run, whatever max_group_s says
    event_samples: int = int(_DEFAULT["event_samples"])  # GPU-time samples per side and round (their median)
    loop_ms: float = float(_DEFAULT["loop_ms"])  # length of one side's Python loop per round
    graph_ms: float = float(_DEFAULT["graph_ms"])  # length of the captured graph a side replays per round
    warmup_ms: float = float(_DEFAULT["warmup_ms"])
    max_group_s: float = float(_DEFAULT["max_group_s"])  # rounds after min_rounds stop once a group took this long
    twin: str = str(_DEFAULT["twin"])  # the implementation also timed as a second side (the A/A pair)

    @classmethod
    def from_config(cls, d: dict | None) -> "PairedConfig":
        d = dict(d or {})
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Side:
    """One side of a paired session: an implementation (``impl``, ``copy`` 0, or 1 for the A/A twin) and the
    closures over its input placements (called in turn)."""
    impl: str
    fns: list[Callable[[], object]]
    copy: int = 0
    call: Callable[[], object] | None = None  # the Rotation over fns (built by run_rounds)
    graph: object = None  # a GraphReplay (GPU) or None

    @property
    def name(self) -> str:
        return self.impl if self.copy == 0 else f"{self.impl}#{self.copy}"


def order(sides: list, r: int) -> list:
    """The order of round r: as given in even rounds, reversed in odd ones (A B C, C B A, A B C, ...): over any two
    consecutive rounds each side's mean position is the same, so a linear drift charges every side equally."""
    return list(sides) if r % 2 == 0 else list(reversed(sides))


LONG_CALL_MS = 2.0  # a side whose call takes longer is timed with fewer samples a turn (``turn_plan``)


def turn_plan(cfg: PairedConfig, call_ms: float, placements: int) -> tuple[int, int]:
    """(GPU-time samples, Python-loop repeats) of one side's turn for calls of about ``call_ms``: ``event_samples``
    (at least one per placement) and three loop repeats for short calls; for calls over LONG_CALL_MS, as many samples
    as fit in about ``event_samples`` x LONG_CALL_MS (at least one: the placements rotate over the rounds instead)
    and one loop repeat, so a group of 40 ms calls costs seconds, not a minute."""
    samples = max(placements, int(cfg.event_samples))
    if not call_ms > LONG_CALL_MS:  # NaN (unknown) counts as short
        return samples, 3
    return max(1, min(samples, int(cfg.event_samples * LONG_CALL_MS / call_ms))), 1


def run_rounds(sides: list[Side], timer, cfg: PairedConfig, *, graphs: bool = False,
               clock_probe: Callable[[], float] | None = None, clock: Callable[[], float] = time.perf_counter,
               call_ms: float = float("nan")) -> list[dict]:
    """Time every side in every frame, round after round (``order``); one row per (side, round, frame).

    Every side is warmed first and the stream hold is set to the longest any side asked for, so all sides are timed
    under one hold. ``graphs``: capture a CUDA graph per side (a side whose capture fails has no graph rows and
    says why in ``graph_error``). ``clock_probe`` reads the SM clock (MHz) after each side's turn. ``call_ms``: the
    slowest side's time per call, where known (its cell's median): sizes each turn (``turn_plan``)."""
    from rooflab.timers import Rotation

    if len(sides) < 2:
        return []
    holds = []
    for side in sides:
        side.call = Rotation(side.fns)
        timer.warmup(side.call, cfg.warmup_ms)
        holds.append(getattr(timer, "hold_cycles", 0))
    if hasattr(timer, "hold_cycles"):
        timer.hold_cycles = max(holds)  # one hold for every side: none is timed from a shorter spin
        timer.hold_us = timer.hold_cycles / max(getattr(timer, "cycles_per_us", 0) or 1.0, 1e-9)
    errors = {}
    if graphs:
        from rooflab.timing import GraphReplay

        for side in sides:
            try:  # a whole number of rotations, so every placement is in the graph
                side.graph = GraphReplay(side.call, cfg.graph_ms, multiple=len(side.fns))
            except Exception as exc:  # not every implementation can be captured
                errors[side.name] = f"{type(exc).__name__}: {exc}"[:300]
    samples, loop_repeats = turn_plan(cfg, call_ms, len(sides[0].fns))
    rows: list[dict] = []
    t0 = clock()
    for r in range(max(1, int(cfg.rounds))):
        if r >= cfg.min_rounds and r % 2 == 0 and clock() - t0 > cfg.max_group_s:
            break  # after a whole number of A B / B A pairs of rounds, so a linear drift cancels
        for side in order(sides, r):
            times = {"gpu": float(np.median(timer.sample(side.call, samples)))}
            if side.graph is not None:
                times["graph"] = side.graph.replay_ms()
            if cfg.loop_ms > 0:
                times["loop"] = timer.loop(side.call, cfg.loop_ms, repeats=loop_repeats)
            mhz = clock_probe() if clock_probe else float("nan")
            share = float(getattr(timer, "loop_cpu_share", float("nan")))
            rows += [{
                "impl": side.impl,
                "copy": side.copy,
                "round": r,
                "frame": frame,
                "ms": ms,
                "sm_clock_mhz": mhz,
                "graph_error": errors.get(side.name, ""),
                "loop_cpu_share": share if frame == "loop" else float("nan")
            } for frame, ms in times.items()]
    for side in sides:  # free the graphs' pools and the rotations' kept outputs before the next group allocates
        side.graph = side.call = None
    return rows


def group_key(cell) -> tuple:
    """The cells that form one paired group: same kernel, dtype, shape and pass (a Cell, or a row's values)."""
    from rooflab.shapes import label

    return (cell.dtype, label(cell.shape) if cell.shape else str(cell.size), cell.pass_)


def with_twin(sides: list[Side], make_twin: Callable[[str], list[Callable[[], object]] | None],
              twin: str) -> list[Side]:
    """The sides with the A/A twin appended: ``twin``'s implementation again, over closures ``make_twin`` builds
    on fresh input sets (None where it cannot); the sides as they are when ``twin`` is not among them."""
    if not any(s.impl == twin and s.copy == 0 for s in sides):
        return sides
    fns = make_twin(twin)
    return sides + [Side(twin, fns, copy=1)] if fns else sides


def describe(cfg: PairedConfig) -> dict:
    """The settings a paired row was timed with (its provenance)."""
    return {f"paired_{k}": v for k, v in dataclasses.asdict(cfg).items() if k != "enabled"}


class PairedSweep:
    """The paired sessions of one kernel's sweep, run as its groups complete (experiments/measure.py calls
    ``after_cell`` for every cell in sweep order).

    A group's session runs once every one of its cells but the CUDA one has been measured or reused: its sides are
    the implementations whose cells are ok (closures kept by run_cell, or built again for a reused cell) and the
    twin. CUDA cells are swept last (their extensions build in the background meanwhile), so each gets a session
    of its own against the builtin (session "cuda"). Each session is appended to the store as it ends
    (``<kernel>.paired.jsonl`` beside the cell store): a resumed sweep runs only the sessions it lacks. A session
    that raises is recorded with its error and no rounds; the sweep goes on."""

    def __init__(self, kernel, cells, device: str, timing, cfg: PairedConfig, timer, store_path, identity: str,
                 seed: int = 0, log=None):
        from collections import Counter

        self.kernel, self.device, self.timing, self.cfg, self.timer = kernel, device, timing, cfg, timer
        self.seed, self.log, self.identity, self.store_path = seed, log, identity, store_path
        self.remaining = Counter(group_key(c) for c in cells if c.impl != "cuda")
        self.ok: dict[tuple, dict[str, tuple]] = {}  # group -> impl -> (cell, closures or None)
        self.meta: dict[tuple, dict] = {}  # group -> the descriptive columns of its rows
        self.call_ms: dict[tuple, float] = {}  # (group, impl) -> its cell's median, ms
        self.sessions = load_sessions(store_path, identity)
        self.groups: set[tuple] = set()  # the groups of this sweep: only their sessions are written
        self.running: dict | None = None  # the record of the session in its rounds now

    def after_cell(self, cell, row: dict, fns=None) -> None:
        """Note a cell (measured or reused) and run its group's session once the group is complete. Never raises:
        whatever goes wrong is the session's record, so the sweep and its parquet are never lost to a session."""
        try:
            self._after_cell(cell, row, fns)
        except Exception as exc:
            if self.log:
                self.log.error("paired rounds after %s: %s: %s", cell, type(exc).__name__, exc)

    def _after_cell(self, cell, row: dict, fns=None) -> None:
        g = group_key(cell)
        self.groups.add(g)
        if row.get("status") == "ok":
            self.meta.setdefault(g, {k: row.get(k) for k in ("shape", "size", "family", "preset")})
            ms = row.get("median_ms", float("nan"))
            self.call_ms[(g, cell.impl)] = float(ms) if ms is not None else float("nan")
        if cell.impl == "cuda":
            if row.get("status") == "ok" and "builtin" in self.ok.get(g, {}):
                builtin = self.ok[g]["builtin"][0]
                self._session(g, "cuda", {"cuda": (cell, fns), "builtin": (builtin, None)})
            return
        if row.get("status") == "ok":
            self.ok.setdefault(g, {})[cell.impl] = (cell, fns)
        self.remaining[g] -= 1
        if self.remaining[g] == 0:
            self._session(g, "all", self.ok.get(g, {}))
            # the closures go; the cells stay, for a CUDA session (rebuilt then)
            self.ok[g] = {impl: (c, None) for impl, (c, _) in self.ok.get(g, {}).items()}

    def _session(self, g: tuple, session: str, entries: dict) -> None:
        from rooflab.cell import cell_callables
        from rooflab.kernel import math_mode

        key = session_key(g, session, entries)
        if not self.cfg.enabled or len(entries) < 1 or key in self.sessions:
            if key in self.sessions and self.sessions[key].get("hung") and self.log:
                self.log.warning(
                    "paired session %s %s hung in an earlier run and is not run again (%s); remove its lines from %s "
                    "to try it", session, g, self.sessions[key].get("error"), self.store_path)
            return
        cells = {impl: c for impl, (c, _) in entries.items()}
        record = {"group": list(g), "session": session, "sides": sorted(entries), "rows": [], "error": ""}
        self._append({**record, "started": True})  # a crash inside the rounds leaves this line: retried next run
        self.running = record
        sides: list[Side] = []
        try:
            sides = [
                Side(impl, fns or cell_callables(self.kernel, c, self.device, self.timing, self.seed))
                for impl, (c, fns) in entries.items()
            ]
            if session == "all":
                sides = with_twin(
                    sides, lambda impl: cell_callables(self.kernel, cells[impl], self.device, self.timing, self.seed),
                    self.cfg.twin)
            slowest = max((self.call_ms.get((g, impl), float("nan")) for impl in entries), default=float("nan"))
            with math_mode(g[0]):
                rows = run_rounds(sides, self.timer, self.cfg, graphs=self.device == "cuda" and self.timing.cudagraph,
                                  clock_probe=getattr(self.timer, "sm_clock_mhz", None), call_ms=slowest)
            meta = {"kernel": self.kernel.name, "dtype": g[0], "pass": g[2], **self.meta.get(g, {}), "session": session}
            record["rows"] = [{**meta, **r} for r in rows]
        except Exception as exc:  # one bad session must not lose the sweep
            record["error"] = f"{type(exc).__name__}: {exc}"[:1000]
            if self.log:
                self.log.error("paired session %s %s of %s failed: %s", session, g, self.kernel.name, record["error"])
        finally:
            del sides
            if self.device == "cuda":
                try:
                    import torch

                    torch.cuda.empty_cache()
                except Exception:  # a sticky CUDA error: the session's record says what it was
                    pass
        self.running = None
        self.sessions[key] = record
        self._append(record)

    def hung(self, error: str) -> None:
        """Record the session in flight, if any, as hung (``error``): rooflab/lifeline.stall_watch's ``on_exit``, from
        its thread, as the process exits. The store keeps it, so the rerun does not pair that group again."""
        record = self.running
        if record is not None:
            self._append({**record, "error": error, "hung": True})

    def _append(self, record: dict) -> None:
        import json

        self.store_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.store_path, "a") as fh:
            fh.write(json.dumps({**record, "_identity": self.identity}, default=str) + "\n")

    @property
    def rows(self) -> list[dict]:
        """The rounds of this sweep's groups: measured now or stored by an earlier run of the same code."""
        return [r for (g, _, _), rec in self.sessions.items() if g in self.groups for r in rec["rows"]]


def session_key(group: tuple, session: str, sides) -> tuple:
    """What a stored session is found by: its group, its kind and the implementations it paired (a sweep that now
    has another side pairs the group again)."""
    return (tuple(group), session, tuple(sorted(sides)))


def load_sessions(path, identity: str) -> dict:
    """The stored sessions measured with this identity (code and settings) that ended without an error or hung (the
    process stopped in their rounds: run again, they would hang again), by session_key; others, unreadable lines and
    sessions that only started (a crash inside their rounds) are left out, so they run again."""
    import json
    from pathlib import Path

    out = {}
    path = Path(path)
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
            if rec.get("_identity") != identity:
                continue
            key = session_key(rec["group"], rec["session"], rec.get("sides", []))
            if rec.get("started"):
                out.pop(key, None)  # a session started again after this line, or never ended
                continue
            if not rec.get("error") or rec.get("hung"):
                out[key] = rec
        except (ValueError, KeyError, TypeError):
            continue
    return out
