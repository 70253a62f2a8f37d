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
