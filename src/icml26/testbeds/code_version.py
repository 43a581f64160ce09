"""Which code built a cached artefact: a fingerprint of the functions a build can reach.

A cached artefact is keyed by its config (``cache.config_hash``). When the code that trains it changes and the
config does not (a new loss term, a fixed data split), the key alone would hand back the artefact the old code
built. So every build also records a fingerprint of its code: the source of the build callable and of every
``icml26`` function and class it can reach by name (globals it reads, attributes of ``icml26`` modules it reads,
closure cells, ``functools.partial`` targets), each normalised to its syntax tree without docstrings, so that
comments, docstrings and formatting do not count, while a changed statement does. A load whose fingerprint
differs from the recorded one rebuilds the artefact and names the functions that changed.

Left out on purpose: code that cannot change what a build writes (the cache itself, progress lines, logging,
the result store), and everything outside ``icml26`` (library versions are a different question: a new torch can
change numerics too, but rebuilding on every library upgrade would cost more than it catches).

    >>> from icml26.testbeds import causal_lm
    >>> fp = code_fingerprint(causal_lm.train_causal_lm)
    >>> "icml26.testbeds.training.train_steps" in fp and "icml26.testbeds.cache.load_cached" not in fp
    True
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import re
import textwrap
import types
from typing import Any, Iterable

PACKAGE = "icml26"
# modules whose code cannot change an artefact's contents (where it is cached, what is printed while building)
NEUTRAL = ("icml26.testbeds.cache", "icml26.testbeds.code_version", "icml26.testbeds.progress",
           "icml26.harness.store", "icml26.harness.report", "icml26.harness.provenance", "icml26.harness.text",
           "icml26.harness.figures", "icml26.harness.validate", "icml26.cli", "icml26.catalog")
MAX_OBJECTS = 2000  # a guard: a build reaching more than this many functions is fingerprinted on the first ones


def code_fingerprint(*roots: Any) -> dict[str, str]:
    """``{qualified name: hash of its normalised source}`` for ``roots`` and every ``icml26`` function or class
    they reach by name. ``roots`` are callables, classes or modules (a module stands for every function and class
    defined in it); a root defined outside ``icml26`` is followed but not recorded itself."""
    out: dict[str, str] = {}
    for qual, obj in _reachable(roots):
        src = _normalised_source(obj)
        if src is not None:
            out[qual] = hashlib.sha256(src.encode()).hexdigest()[:16]
    return out


def fingerprint_hash(fp: dict[str, str]) -> str:
    """One short hash of a whole fingerprint (what is compared first)."""
    blob = "\n".join(f"{k} {v}" for k, v in sorted(fp.items())).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def changed(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Names of the functions added, removed or edited between two fingerprints, sorted."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


# helper functions

def _ours(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or (obj.__name__ if isinstance(obj, types.ModuleType) else "")
    mod = str(mod)
    return (mod == PACKAGE or mod.startswith(PACKAGE + ".")) and not mod.startswith(NEUTRAL)


def _unwrap(obj: Any) -> Any:
    while isinstance(obj, functools.partial):
        obj = obj.func
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if inspect.ismethod(obj):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    return inspect.unwrap(obj) if callable(obj) else obj


def _code_objects(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def _reachable(roots: Iterable[Any]) -> list[tuple[str, Any]]:
    seen: set[int] = set()
    out: list[tuple[str, Any]] = []
    todo = list(roots)
    root_ids = {id(_unwrap(r)) for r in roots}  # a root is followed even when defined outside icml26 (a user's build)
    while todo and len(out) < MAX_OBJECTS:
        obj = _unwrap(todo.pop())
        if isinstance(obj, types.ModuleType):
            if _ours(obj):
                todo.extend(v for v in vars(obj).values()
                            if (inspect.isfunction(v) or inspect.isclass(v)) and getattr(v, "__module__", "") == obj.__name__)
            continue
        if id(obj) in seen or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not _ours(obj) and id(obj) not in root_ids:
            continue
        seen.add(id(obj))
        if _ours(obj):
            out.append((f"{obj.__module__}.{obj.__qualname__}", obj))
        if inspect.isclass(obj):
            todo.extend(v for v in vars(obj).values() if callable(_unwrap(v)) or isinstance(v, property))
            todo.extend(b for b in obj.__mro__[1:] if _ours(b))
            continue
        g = obj.__globals__
        for code in _code_objects(obj.__code__):
            for name in code.co_names:
                v = g.get(name)
                if v is None:
                    continue
                if isinstance(v, types.ModuleType):
                    if _ours(v):  # `training.train_loop(...)`: the attributes read on an icml26 module
                        todo.extend(getattr(v, n) for n in code.co_names if hasattr(v, n))
                else:
                    todo.append(v)
        for cell in obj.__closure__ or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
    return out


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


@functools.lru_cache(maxsize=8192)
def _normalised_source(obj: Any) -> str | None:
    """The syntax tree of ``obj``'s source without docstrings (memoised: module-level functions and classes are
    the same objects on every load of a process)."""
    try:
        src = inspect.getsource(obj)
    except (OSError, TypeError):
        return None
    try:
        return ast.dump(_strip_docstrings(ast.parse(textwrap.dedent(src))))
    except SyntaxError:  # a lambda's source is the line it sits on, not always a whole statement
        lines = [re.sub(r"\s+", " ", ln.split("#", 1)[0]).strip() for ln in src.splitlines()]
        return "\n".join(ln for ln in lines if ln)


__all__ = ["code_fingerprint", "fingerprint_hash", "changed"]
