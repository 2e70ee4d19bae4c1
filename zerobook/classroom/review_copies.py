"""Copies of the course's own code in a submission: each of the student's functions compared with
the functions of the course modules that implement what its lab grades, names and layout aside.

A function's normalised tokens are its code as `ast.unparse` writes it (docstrings, comments,
annotations and decorators left out), strings as one token; in every window of WINDOW tokens
each identifier becomes a placeholder numbered by its first appearance there, so a consistent
renaming changes nothing and a copied stretch matches wherever it sits. A student's function
covers a course function's token where a window holding it is one of the student function's
windows; the share covered is the score.

The thresholds come from measurements (tests/test_review.py keeps them true): every lab's
reference solution covers at most 57% of a course function of MIN_TOKENS or more (its
Zero3.__init__ covers 57% of zerobook/zero/stage3.py's Zero3._install, its ring 57% of
ring_reduce_scatter), while a copy of a course module with every name it defines renamed and its
functions and methods in reverse order covers 100% of each of them, and 85% or more with a print
added after every statement. THRESHOLD sits between. Shorter functions are not compared: there
an honest solution and the course's converge (a reference covers 74% of sharded_checkpoint.load,
the standard DCP call sequence; an honest count of unique storages 96% of measure.unique_bytes).
"""

from __future__ import annotations

import ast
import copy
import io
import keyword
import tokenize
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # zerobook/
WINDOW = 10  # tokens
MIN_TOKENS = 100  # a course function shorter than this is not compared
THRESHOLD = 0.7  # the share of a course function's tokens that flags a copy
KEPT = {tokenize.OP, tokenize.NUMBER}
LAYOUT = {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE}
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function and method in `tree`, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, DEFS):
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")


def bare(function: ast.AST) -> ast.AST:
    """`function` without docstrings, annotations and decorators, its calls' keywords one
    name (a copy)."""
    function = copy.deepcopy(function)
    for node in ast.walk(function):
        if isinstance(node, DEFS):
            node.decorator_list, node.returns = [], None
        elif isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, ast.keyword) and node.arg:
            node.arg = "keyword"  # f(stage=stage) renamed is f(stage=s): the same
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant):
                node.body = body[1:] or [ast.Pass()]
    return function


def tokens(function: ast.AST) -> list:
    """The normalised tokens of `function`: an identifier is ("name", its text)."""
    text = ast.unparse(bare(function))
    out = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
            out.append(("name", token.string))
        elif token.type == tokenize.NAME or token.type in KEPT:
            out.append(token.string)
        elif token.type == tokenize.STRING:
            out.append("'...'")
        elif token.type in LAYOUT:
            out.append(tokenize.tok_name[token.type])
    return out


def windows(found: list):
    """(position, window) of every WINDOW tokens, identifiers numbered within the window."""
    for start in range(len(found) - WINDOW + 1):
        names = {}
        yield (
            start,
            tuple(
                names.setdefault(t[1], f"#{len(names)}") if isinstance(t, tuple) else t
                for t in found[start : start + WINDOW]
            ),
        )


def module_files(module: str) -> list[Path]:
    """The source files of a zerobook module (a package: all of its modules)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    return sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


@lru_cache(maxsize=None)
def course(modules: tuple[str, ...]) -> tuple[list, dict]:
    """The course functions of `modules` worth comparing: [(label, tokens)], and an index
    from each window to where it occurs [(function, position)]."""
    found, index = [], {}
    for module in modules:
        for path in module_files(module):
            label = path.relative_to(PACKAGE.parent).as_posix()
            for name, node in functions(ast.parse(path.read_text())):
                normalised = tokens(node)
                if len(normalised) >= MIN_TOKENS:
                    found.append((f"{label}'s {name}", len(normalised)))
                    for start, window in windows(normalised):
                        index.setdefault(window, []).append((len(found) - 1, start))
    return found, index


def copies(tree: ast.AST, modules: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """Each function of `tree` that covers THRESHOLD or more of a course function of
    `modules`: (line, "your NAME matches COURSE FUNCTION (N% ...)", why)."""
    found, index = course(tuple(modules))
    out = []
    for name, node in functions(tree):
        covered: dict[int, set] = {}
        for window in {w for _, w in windows(tokens(node))}:
            for function, start in index.get(window, ()):
                covered.setdefault(function, set()).update(range(start, start + WINDOW))
        shares = [(len(c) / found[f][1], f) for f, c in covered.items()]
        share, best = max(shares, default=(0.0, None))
        if share >= THRESHOLD:
            what = f"your {name} matches {found[best][0]} ({share:.0%} of its normalised tokens)"
            out.append(
                (
                    node.lineno,
                    what,
                    "a copy of the course's own code, names and layout aside",
                )
            )
    return out
