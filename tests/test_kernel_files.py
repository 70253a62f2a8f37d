"""The kernel files read like the Triton tutorials: a short module docstring, the @triton.jit kernels first, no file
over 400 lines and no comment block over 8; each kernel is a folder (kernels/<name>/); the launch choices live in
its table.py (the shared ones beside the shared code), each with a one-line reason and its evidence, and the kernels
read exactly those values."""
from __future__ import annotations

import ast
import importlib
import io
import tokenize
from pathlib import Path

import pytest

from kernels._shared.tables import Choice, values

REPO = Path(__file__).resolve().parent.parent
FILES = sorted((REPO / "kernels").rglob("*.py"))
KERNEL_FILES = sorted(p for p in (REPO / "kernels").glob("*/__init__.py") if not p.parent.name.startswith("_"))
TABLE_MODULES = {  # module -> its tables
    **{
        f"kernels.{p.parent.name}.table": None
        for p in KERNEL_FILES if (p.parent / "table.py").exists()
    }, "kernels._shared.rows": ("ROWS", ),
    "kernels._shared.elementwise": ("ELEMENTWISE", )
}
MAX_LINES, MAX_COMMENT_BLOCK, MAX_MODULE_DOCSTRING = 400, 8, 12


def _docstrings(tree: ast.Module):
    """(name, first line, number of lines) of every docstring in the file."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield getattr(node, "name", "<module>"), body[0].lineno, body[0].end_lineno - body[0].lineno + 1


def _comment_blocks(source: str):
    """(first line, number of lines) of every run of consecutive comment-only lines."""
    lines = source.splitlines()
    only = sorted({
        t.start[0]
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT and lines[t.start[0] - 1].lstrip().startswith("#")
    })
    start = prev = None
    for n in only + [None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            yield start, prev - start + 1
        start = prev = n


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_file_over_400_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_comment_block_over_8_lines(path):
    source = path.read_text()
    long = [f"# block at line {n} ({k} lines)" for n, k in _comment_blocks(source) if k > MAX_COMMENT_BLOCK]
    long += [
        f"docstring of {name} at line {n} ({k} lines)" for name, n, k in _docstrings(ast.parse(source))
        if k > (MAX_MODULE_DOCSTRING if name == "<module>" else MAX_COMMENT_BLOCK)
    ]
    assert not long, f"{path.name}: " + "; ".join(long)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.parent.name)
def test_kernel_file_reads_docstring_kernels_wrapper_then_kernel(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), "a module docstring first"
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    jit = [any("triton.jit" in ast.unparse(d) for d in n.decorator_list) for n in defs]
    assert any(jit) and jit.index(False) > max(i for i, j in enumerate(jit) if j), "the @triton.jit kernels first"
    last = tree.body[-1]
    assert isinstance(last, ast.Assign) and last.targets[0].id == "KERNEL", "KERNEL = Kernel(...) last"


def _tables():
    out = {}
    for module, names in TABLE_MODULES.items():
        m = importlib.import_module(module)
        out |= {
            name: t
            for name, t in vars(m).items()
            if name.isupper() and isinstance(t, dict) and (names is None or name in names)
        }
    return out


def test_every_kernel_is_a_folder_with_its_table():
    from rooflab.kernel import kernel_names

    names = [p.parent.name for p in KERNEL_FILES]
    assert names == kernel_names() and not list((REPO / "kernels").glob("[!_]*.py"))
    assert {f"kernels.{n}.table" for n in names if n not in ("saxpy", "vecadd")} <= set(TABLE_MODULES)


def _choices():
    for kernel, table in _tables().items():
        for entry, choice in table.items():
            for key, c in ({None: choice} if isinstance(choice, Choice) else choice).items():
                yield f"{kernel}.{entry}[{key}]", c


@pytest.mark.parametrize("where, choice", list(_choices()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_launch_choice_has_a_one_line_reason_and_its_evidence(where, choice):
    assert isinstance(choice, Choice)
    assert choice.reason and "\n" not in choice.reason and len(choice.reason) <= 160
    if choice.evidence is not None:
        name = choice.evidence.removeprefix("data/tuning/")
        assert choice.evidence == f"data/tuning/{name}" and name.endswith(".csv")
        assert (REPO / "data/tuning" / name).exists(), name


READERS = {  # kernel module -> (its table, the attributes it reads from it)
    "kernels._shared.rows": ("ROWS", {"MAX_BLOCK_SIZE": "MAX_BLOCK_SIZE", "BYTES_PER_THREAD": "BYTES_PER_THREAD"}),
    "kernels.layernorm": ("LAYERNORM", {k: k for k in ("TILED_LAUNCH", "HELD_MIN_WARPS", "WB_EARLY_COLS",
                                                       "REGISTER_CAP", "PREFETCH_PROGRAMS", "UNMASKED_COLS",
                                                       "SPLIT_BELOW", "SPLIT_CHUNK", "SPARSE_BLOCK", "WIDE_HELD",
                                                       "ALIGNED_TILES")}),
    "kernels.rmsnorm": ("RMSNORM", {k: k for k in ("RELOAD_MIN_COLS", "RELOAD_WARPS", "UNMASKED_COLS", "SPLIT_BELOW",
                                                   "SPLIT_CHUNK", "SPARSE_BLOCK", "TILED_LAUNCH", "ALIGNED_TILES",
                                                   "WIDE_HELD")}),
    "kernels.softmax": ("SOFTMAX", {k: k for k in ("RELOAD_MIN_COLS", "HELD_MIN_WARPS", "UNMASKED_COLS", "SPLIT_BELOW",
                                                   "SPLIT_CHUNK", "SPLIT_UNALIGNED", "ALIGNED_TILES", "PACK_ROWS")}),
    "kernels.rowsum": ("ROWSUM", {k: k for k in ("MIN_TILE_ELEMENTS", "UNMASKED_COLS", "SPLIT_BELOW", "SPLIT_CHUNK",
                                                 "SPLIT_UNALIGNED", "SPLIT_ONCE_MAX_ROWS",
                                                 "ALIGNED_TILES")}),
    "kernels.matmul": ("MATMUL", {"TMA_MIN_MNK": "TMA_MIN_MNK", "TF32_KMAJOR_TMA": "TF32_KMAJOR_TMA",
                                      "IEEE_TMA": "IEEE_TMA"}),
    "kernels.matmul.configs": ("MATMUL", {"IEEE_TILES": "IEEE_TILES"}),
    "kernels.matmul.operands": ("MATMUL", {k: k for k in ("PAD_MIN_MNK", "KMAJOR_MIN_MNK", "KMAJOR_MIN_M")}),
    "kernels.attention": ("ATTENTION", {k: k for k in ("TMA_TILES", "POINTER_TILES", "HEAVY_FIRST")}),
    "kernels.attention.backward": ("ATTENTION", {k: k for k in ("DKDV_TILES", "DQ_TILES", "DKDV_SPLIT_BELOW",
                                                                           "DKDV_GROUP_FILL")}),
    "kernels.attention.plan": ("ATTENTION", {"FALLBACK_TILES": "FALLBACK_TILES"}),
}


def test_every_table_is_read_by_its_kernel():
    import torch

    tables = _tables()
    read = set()
    for module, (table, attrs) in READERS.items():
        m = importlib.import_module(module)
        for attr, entry in attrs.items():
            assert getattr(m, attr) == values(tables[table][entry]), f"{module}.{attr}"
            read.add((table, entry))
    from kernels import gelu
    from kernels._shared import elementwise as _elementwise
    from kernels._shared import rows as _rows

    assert (_rows.MIN_WARPS, _rows.MAX_WARPS) == values(tables["ROWS"]["WARPS"])
    for m, table in ((_elementwise, "ELEMENTWISE"), (gelu, "GELU")):
        assert m.LAUNCH == {getattr(torch, k): v for k, v in values(tables[table]["LAUNCH"]).items()}
    read |= {("ROWS", "WARPS"), ("ELEMENTWISE", "LAUNCH"), ("GELU", "LAUNCH")}
    from kernels import matmul as _matmul  # the split-K plan reads its entries as one NamedTuple

    assert _matmul.SPLITK == tuple(values(tables["MATMUL"][f]) for f in _matmul.SPLITK._fields)
    read |= {("MATMUL", f) for f in _matmul.SPLITK._fields}
    assert read == {(t, e) for t, table in tables.items() for e in table}, "an entry no kernel reads"


@pytest.mark.parametrize("name", ["gelu", "softmax"])
def test_cuda_sources_come_from_their_cu_files(name):
    module = importlib.import_module(f"kernels.{name}")
    assert module.CUDA_SOURCE == (REPO / "kernels" / name / f"{name}.cu").read_text()
