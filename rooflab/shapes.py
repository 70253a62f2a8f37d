"""Shapes a kernel is swept at: its family's dimensions, the named presets, and config `shapes`.

A kernel declares a shape family (``Kernel.family``): the names of its problem's dimensions. A shape is a tuple of
ints in that order; its label joins them with "x" (``"4096x4097"``, ``"16x4096x14336"``). The square sweep of
config `sizes` is the family's shape with every dimension n (``square``), so its rows keep ``size = n``; a row of any
other shape has ``size`` NaN (there is no one N) and is placed by its bytes, or its own label, instead.

Presets are data: every shape names the tensor of the model it comes from (``PRESETS``). `square` is the config's
sizes; `llm` the activations, logits and projections of open models; `odd` the shapes a power-of-two sweep misses.
A preset names shapes per family, so a new kernel of a family is swept at them without an edit here.

Kept free of torch: the Snakefile imports it to check the config.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# family -> the names of its dimensions, in the order a shape lists them
FAMILIES: dict[str, tuple[str, ...]] = {
    "rows": ("rows", "cols"),  # elementwise and row kernels: a (rows, cols) matrix, rows reduced or mapped
    "mkn": ("M", "K", "N"),  # C (M x N) = A (M x K) @ B (K x N)
    "bhsd": ("batch", "heads", "seq", "head_dim"),  # attention: Q, K, V and O each (batch, heads, seq, head_dim)
}
# A family whose square shape is not n in every dimension: which dimension n is, and the shape n makes. bhsd's is
# FlashAttention-2's benchmark: sequence length n at 16k tokens a batch (batch = 16384 // n), 2048 wide in 16 heads
# of 128 (head dim 64, 32 heads: the presets); the sizes 256-8192 and 1793 of a GPU sweep give 6 batches of 2-64.
ATTENTION_TOKENS, ATTENTION_WIDTH, ATTENTION_HEAD_DIM = 16384, 2048, 128
SQUARE_RULES = {
    "bhsd": (2, lambda n:
             (max(1, ATTENTION_TOKENS // n), ATTENTION_WIDTH // ATTENTION_HEAD_DIM, n, ATTENTION_HEAD_DIM)),
}
SQUARE = "square"
CUSTOM = "custom"  # the set of explicit shapes a config lists


@dataclass(frozen=True)
class Shape:
    """One shape of a preset, with the tensor of the model it comes from."""
    dims: tuple[int, ...]
    source: str


def _table(*entries) -> tuple[Shape, ...]:
    return tuple(Shape(tuple(dims), source) for dims, source in entries)


# Hidden sizes: Llama-3 8B / Mistral 7B 4096, Llama-3 70B 8192, Llama-3 405B 16384, GPT-2 768. MLP widths: 14336
# (Llama-3 8B, Mistral 7B), 28672 (70B), 53248 (405B). Vocabularies: Llama-3 128256, Mistral 32000, Qwen2.5 151936
# (0.5B-3B; 152064 from 7B), Gemma 256000, GPT-2 50257. Tokens: prefill 1k-16k, decode batches 1-128.
LLM = {
    "rows":
    _table(
        ((16384, 4096), "Llama-3 8B / Mistral 7B hidden 4096, 16k prefill tokens"),
        ((4096, 8192), "Llama-3 70B hidden 8192, 4k tokens"), ((2048, 16384), "Llama-3 405B hidden 16384, 2k tokens"),
        ((128, 4096), "Llama-3 8B hidden 4096, decode batch 128"),
        ((8192, 14336), "Llama-3 8B / Mistral 7B MLP width 14336, 8k tokens"),
        ((1024, 28672), "Llama-3 70B MLP width 28672, 1k tokens"),
        ((64, 53248), "Llama-3 405B MLP width 53248, decode batch 64"),
        ((32, 128256), "Llama-3 vocabulary 128256, decode batch 32"),
        ((4096, 32000), "Mistral 7B vocabulary 32000, 4k tokens"),
        ((1024, 151936), "Qwen2.5 (0.5B-3B) vocabulary 151936, 1k tokens"),
        ((8, 256000), "Gemma vocabulary 256000, decode batch 8"), ((1024, 50257), "GPT-2 vocabulary 50257, 1k tokens"),
    ),
    "mkn":
    _table(
        ((16384, 4096, 6144), "Llama-3 8B QKV projection (4096 -> 32 + 2 x 8 heads of 128), 16k prefill tokens"),
        ((4096, 4096, 14336), "Llama-3 8B / Mistral 7B MLP up projection, 4k tokens"),
        ((4096, 14336, 4096), "Llama-3 8B / Mistral 7B MLP down projection, 4k tokens"),
        ((2048, 8192, 28672), "Llama-3 70B MLP up projection, 2k tokens"),
        ((2048, 16384, 16384), "Llama-3 405B attention output projection, 2k tokens"),
        ((1, 4096, 14336), "Llama-3 8B MLP up projection, decode batch 1"),
        ((32, 8192, 28672), "Llama-3 70B MLP up projection, decode batch 32"),
        ((128, 4096, 152064), "Qwen2.5 7B-sized LM head (hidden 4096 -> vocabulary 152064), decode batch 128"),
        # narrow decode products (M x K times K x N: a batch of M token rows against a K x N weight): few output tiles
        *(((m, 4096, 4096), f"Llama-3 8B attention q / o projection (4096 x 4096), decode batch {m}")
          for m in (1, 8, 32, 128)),
        *(((m, 4096, 1024), f"Llama-3 8B attention k / v projection (4096 x 1024: 8 heads of 128), decode batch {m}")
          for m in (1, 32, 128)),
        *(((m, 8192, 8192), f"Llama-3 70B attention q / o projection (8192 x 8192), decode batch {m}")
          for m in (1, 32, 128)),
        *(((m, 8192, 1024), f"Llama-3 70B attention k / v projection (8192 x 1024: 8 heads of 128), decode batch {m}")
          for m in (8, 128)),
        *(((m, 4096, 14336), f"Llama-3 8B MLP up projection (4096 x 14336), decode batch {m}")
          for m in (8, 128)), ((32, 14336, 4096), "Llama-3 8B MLP down projection (14336 x 4096), decode batch 32"),
    ),
    # prefill with every K/V head repeated to its query heads; the models' own K/V heads and decode: ATTENTION_CELLS
    "bhsd":
    _table(((8, 32, 2048, 128), "Llama-3 8B / Mistral 7B attention, 32 heads of 128, 2k prefill, batch 8"),
           ((4, 32, 4096, 128), "Llama-3 8B attention, 4k prefill, batch 4"),
           ((2, 32, 8192, 128), "Llama-3 8B attention, 8k prefill, batch 2"),
           ((1, 32, 16384, 128), "Llama-3 8B attention, 16k prefill"),
           ((1, 64, 8192, 128), "Llama-3 70B attention, 64 heads of 128, 8k prefill"),
           ((16, 12, 1024, 64), "GPT-2 attention, 12 heads of 64, 1k context, batch 16"),
           ),
}
ODD = {
    "rows":
    _table(((4096, 4097), "rows one element past a power of two"), ((8192, 5000), "rows of 5000: no power of two"),
           ((4096, 11008), "Llama-2 7B MLP width 11008, 4k tokens"),
           ((6000, 1793), "rows of 1793 (a prime): a multiple of no block"),
           ((4, 1_000_000), "few long rows: 4 rows of a million"), ((16, 333_333), "few long rows, odd length"),
           ((1_000_000, 32), "many short rows: a million rows of 32"), ((500_000, 100), "many short rows of 100"),
           ),
    "mkn":
    _table(((4097, 4097, 4097), "square, one past a power of two"),
           ((1793, 5000, 3001), "no dimension a multiple of a tile"),
           ((8191, 1024, 8191), "one short of a power of two, short K"),
           ((3, 4096, 4097), "three rows: a skinny decode of odd width"),
           ((4096, 17, 4096), "K = 17: an outer product in all but name, memory-bound"),
           ),
    "bhsd":
    _table(((16, 32, 1024, 64), "FlashAttention-2's benchmark at head dim 64: 32 heads, 16k tokens"),
           ((4, 32, 4096, 64), "head dim 64, 32 heads, 4k sequence"),
           ((16, 16, 1000, 128), "sequence 1000: a multiple of no tile"),
           ((3, 16, 4097, 128), "sequence one past a power of two"),
           ),
}
PRESETS: dict[str, dict[str, tuple[Shape, ...]]] = {"llm": LLM, "odd": ODD}

# Attention as each model of the llm preset runs it (experiments/backends.py): (batch, query heads, K/V heads,
# seq_q, seq_k, head_dim), from the models' configs (num_attention_heads, num_key_value_heads, head size): Llama-3
# 8B 32/8/128, 70B 64/8/128, 405B 128/8/128; Mistral 7B 32/8/128; Qwen2.5 0.5B 14/2/64, 7B 28/4/128; Gemma 2B
# 8/1/256, 7B 16/16/256; GPT-2 12/12/64. Prefill 4k tokens (GPT-2: its 1k context); a chunked prefill (1k new
# tokens onto a cache filling the context up to 8k); decode, one query row per sequence, batch 1 and 16, against 8k
# and 32k cached keys (those within each model's context). A cell two models share is listed once.
ATTENTION_CELL_DIMS = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim")
_MODELS = (("Llama-3 8B", 32, 8, 128, 8192), ("Llama-3 70B", 64, 8, 128, 8192), ("Llama-3 405B", 128, 8, 128, 131072),
           ("Mistral 7B", 32, 8, 128, 32768), ("Qwen2.5 0.5B", 14, 2, 64, 32768), ("Qwen2.5 7B", 28, 4, 128, 32768),
           ("Gemma 2B", 8, 1, 256, 8192), ("Gemma 7B", 16, 16, 256, 8192), ("GPT-2", 12, 12, 64, 1024))
PREFILL_TOKENS, CHUNK_TOKENS, CHUNK_KEYS = 4096, 1024, 8192
DECODE_BATCHES, DECODE_KEYS = (1, 16), (8192, 32768)


def _attention_cells() -> tuple[Shape, ...]:
    cells = {}
    for name, heads, kv_heads, dim, context in _MODELS:
        seq, keys = min(PREFILL_TOKENS, context), min(CHUNK_KEYS, context)
        model = f"{name} attention ({heads} heads on {kv_heads} K/V heads of {dim})"
        cells.setdefault((1, heads, kv_heads, seq, seq, dim), f"{model}, {seq} prefill")
        if CHUNK_TOKENS < keys:
            cells.setdefault((1, heads, kv_heads, CHUNK_TOKENS, keys, dim),
                             f"{model}, {CHUNK_TOKENS} new tokens onto {keys - CHUNK_TOKENS} cached")
        for batch in DECODE_BATCHES:
            for k in [k for k in DECODE_KEYS if k <= context] or [context]:
                cells.setdefault((batch, heads, kv_heads, 1, k, dim), f"{name} decode, batch {batch}, {k} keys")
    return _table(*cells.items())


ATTENTION_CELLS: dict[str, tuple[Shape, ...]] = {"llm": _attention_cells()}
PRESET_NAMES = (SQUARE, *PRESETS)


class ShapeError(ValueError):
    """A shape or a shapes entry the sweep cannot use; the message names the entry."""


def square(family: str, n: int) -> tuple[int, ...]:
    """The family's square shape of n: every dimension n, or its SQUARE_RULES shape; what config `sizes` means."""
    if family in SQUARE_RULES:
        return tuple(int(d) for d in SQUARE_RULES[family][1](int(n)))
    return (int(n), ) * len(dims_of(family))


def dims_of(family: str) -> tuple[str, ...]:
    try:
        return FAMILIES[family]
    except KeyError:
        raise ShapeError(f"unknown shape family {family!r}: known families are {describe_families()}") from None


def describe_families() -> str:
    return ", ".join(f"{f} ({' x '.join(d)})" for f, d in FAMILIES.items())


def as_shape(shape, family: str) -> tuple[int, ...]:
    """A family's shape from an int n (the square shape), a tuple or list of ints, or a label "AxB"; ShapeError
    names what is wrong. Kernel files call it first, so ``make_inputs(n, ...)`` keeps meaning the square n."""
    names = dims_of(family)
    if isinstance(shape, bool):
        raise ShapeError(f"a {family} shape is {' x '.join(names)}, got {shape!r}")
    if isinstance(shape, int):
        shape = square(family, shape)
    elif isinstance(shape, str):
        if not re.fullmatch(r"\s*\d+(\s*x\s*\d+)*\s*", shape):
            raise ShapeError(f"{shape!r} is not a shape label like {'x'.join(['4096'] * len(names))}")
        shape = [int(p) for p in shape.split("x")]
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"a {family} shape is {len(names)} integers ({' x '.join(names)}), got {shape!r}") from None
    if any(isinstance(d, float) and not float(d).is_integer() for d in shape):
        raise ShapeError(f"a {family} shape is {len(names)} integers, got {list(shape)!r}")
    if len(dims) != len(names):
        raise ShapeError(f"a {family} shape has {len(names)} dimensions ({' x '.join(names)}), got {len(dims)}: "
                         f"{list(shape)!r}")
    if min(dims) < 0:
        raise ShapeError(f"a dimension cannot be negative, got {list(shape)!r}")
    return dims


def label(shape) -> str:
    """"4096x4097": the row's `shape` (and, for every kernel today, its `problem`)."""
    return "x".join(str(int(d)) for d in shape)


def parse_label(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in str(text).split("x"))


def elements(shape) -> int:
    return math.prod(int(d) for d in shape)


def square_size(shape) -> int | None:
    """n when the shape is a family's square shape of n (the row's `size`), else None."""
    dims = tuple(int(d) for d in shape)
    if len(set(dims)) == 1:
        return dims[0]
    for family, (at, _) in SQUARE_RULES.items():
        if len(dims) == len(FAMILIES[family]) and square(family, dims[at]) == dims:
            return dims[at]
    return None


def preset_shapes(name: str, family: str) -> list[tuple[int, ...]]:
    """The shapes of a named preset (not square: those are the config's sizes) for one family."""
    if name not in PRESETS:
        raise ShapeError(f"unknown shape preset {name!r}: known presets are {', '.join(PRESET_NAMES)}")
    return [s.dims for s in PRESETS[name].get(family, ())]


def source_of(preset: str, family: str, shape) -> str:
    """The tensor a preset's shape comes from ("" for square and explicit shapes)."""
    dims = tuple(int(d) for d in shape)
    return next((s.source for s in PRESETS.get(preset, {}).get(family, ()) if s.dims == dims), "")


def shape_sets(spec) -> dict[str, dict[str, list[list[int]]]]:
    """config `shapes` -> {set: {family: [shape, ...]}}, in the config's order; `square` maps to {} (config sizes
    decide its shapes), a preset to its table, and every explicit mapping ({family: [shape, ...]}) joins the set
    `custom`. Raises ShapeError naming the entry (``shapes[1].rows[0]``). JSON-ready: shapes are lists."""
    if isinstance(spec, (str, dict)):
        spec = [spec]
    if not isinstance(spec, list) or not spec:
        raise ShapeError(f"config key 'shapes' = {spec!r}: a list of presets ({', '.join(PRESET_NAMES)}) and/or "
                         f"mappings of family to shapes, e.g. [square, {{rows: [[4096, 4097]]}}]")
    sets: dict[str, dict[str, list[list[int]]]] = {}
    for i, entry in enumerate(spec):
        where = f"shapes[{i}]"
        if isinstance(entry, str):
            if entry == SQUARE:
                sets[SQUARE] = {}
            elif entry in PRESETS:
                sets[entry] = {f: [list(s.dims) for s in table] for f, table in PRESETS[entry].items()}
            else:
                raise ShapeError(f"config key '{where}' = {entry!r}: unknown preset; known presets are "
                                 f"{', '.join(PRESET_NAMES)} (or a mapping of family to shapes)")
            continue
        if not isinstance(entry, dict) or not entry:
            raise ShapeError(f"config key '{where}' = {entry!r}: a preset name or a mapping of family to shapes, "
                             f"e.g. {{rows: [[4096, 4097]], mkn: [[16, 4096, 14336]]}}")
        custom = sets.setdefault(CUSTOM, {})
        for family, shapes in entry.items():
            if family not in FAMILIES:
                raise ShapeError(f"config key '{where}' has unknown family {family!r}: known families are "
                                 f"{describe_families()}")
            if not isinstance(shapes, list) or not shapes:
                raise ShapeError(f"config key '{where}.{family}' = {shapes!r}: a list of shapes, e.g. "
                                 f"[{'x'.join(['4096'] * len(FAMILIES[family]))}]")
            for j, shape in enumerate(shapes):
                try:
                    if isinstance(shape, (int, float)):  # as_shape reads an int as square: a config spells it out
                        raise ShapeError(f"a {family} shape has {len(FAMILIES[family])} dimensions "
                                         f"({' x '.join(FAMILIES[family])}), got one number")
                    dims = list(as_shape(shape, family))
                    if min(dims) < 1:
                        raise ShapeError(f"every dimension of a swept shape is at least 1, got {label(dims)}")
                except ShapeError as exc:
                    raise ShapeError(f"config key '{where}.{family}[{j}]' = {shape!r}: {exc}") from None
                if dims not in custom.setdefault(family, []):
                    custom[family].append(dims)
    return sets


def set_shapes(sets: dict, name: str, family: str, sizes=()) -> list[tuple[int, ...]]:
    """The shapes of one set for a family: square's from `sizes`, the others' as listed."""
    if name == SQUARE:
        return [square(family, n) for n in sorted({int(n) for n in sizes})]
    return [tuple(s) for s in (sets.get(name) or {}).get(family, [])]
