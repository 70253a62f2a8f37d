"""What a measured cell depends on, as code rather than text: a comment, docstring or layout edit changes nothing.

``code_digest`` hashes a Python file's syntax tree with its docstrings removed (comments and formatting are not in
the tree), and any other file (a CUDA source too) as it is. The cell
store keys reuse on these digests (experiments/measure.py), so a comment-only edit of a kernel re-measures nothing.
"""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalised(path: str | Path) -> bytes:
    """The part of a file a measurement depends on (see the module docstring)."""
    path = Path(path)
    text = path.read_bytes()
    if path.suffix == ".py":
        try:
            return ast.dump(_strip_docstrings(ast.parse(text)), include_attributes=False).encode()
        except SyntaxError:  # not parseable: its text is its identity (the measurement will say what is wrong)
            return text
    return text  # C and CUDA as text: stripping their comments safely needs a lexer (strings, #define lines)


def code_digest(paths, extra: bytes = b"") -> str:
    """One digest over the normalised files (in the order given) and ``extra``."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(Path(p).name).encode() + b"\0" + normalised(p) + b"\0")
    h.update(extra)
    return h.hexdigest()[:16]


def text_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def imported_files(paths, root: str | Path) -> list[Path]:
    """The Python files under ``root`` that the files ``paths`` import, directly or through each other, in the order
    first met: ``import a.b``, ``from a.b import c`` (c a module or a name in a.b) and relative imports, each with
    the packages it passes through (their ``__init__.py``). Read from the syntax trees: nothing is imported. Modules
    outside ``root`` (torch, triton) are not followed."""
    root = Path(root).resolve()
    seen: dict[Path, None] = {}
    todo = [Path(p).resolve() for p in paths]
    done: set[Path] = set()
    while todo:
        path = todo.pop(0)
        if path in done:
            continue
        done.add(path)
        for found in _imports_of(path, root):
            if found not in seen and found not in {Path(p).resolve() for p in paths}:
                seen[found] = None
                todo.append(found)
    return list(seen)


def _module_file(root: Path, dotted: str) -> list[Path]:
    """The files of a dotted module under root, with its packages' __init__.py, outermost first; [] if none."""
    parts, out = dotted.split("."), []
    for i in range(1, len(parts) + 1):
        base = root.joinpath(*parts[:i])
        if (base / "__init__.py").is_file():
            out.append(base / "__init__.py")
        elif base.with_suffix(".py").is_file() and i == len(parts):
            out.append(base.with_suffix(".py"))
        else:
            return out if i > 1 and i == len(parts) else []
    return out


def _imports_of(path: Path, root: Path) -> list[Path]:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, OSError):
        return []
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1]) if path.is_relative_to(root) else ""
    found: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_file(root, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*up, *([base] if base else [])])
            if not base:
                continue
            found += _module_file(root, base)
            for alias in node.names:  # from a import b: b may be a module of package a
                found += [
                    f for f in _module_file(root, f"{base}.{alias.name}")
                    if f.parent.name == alias.name or f.stem == alias.name
                ]
    return [f.resolve() for f in found]
