"""Which code built a cached artefact: a fingerprint of the code a build can reach.

A cached artefact is keyed by its config (``cache.config_hash``). When the code that trains it changes and the
config does not (a new loss term, a fixed data split), the key alone would hand back the artefact the old code
built. So every build also records a fingerprint of its code, one entry per ``icml26`` object it can reach:

- functions and classes, through the globals the code reads, attributes of ``icml26`` modules it reads, imports
  written inside a function, closure cells, ``functools.partial`` targets, methods of reached classes, and
  functions or classes held in module-level containers; each entry is the hash of its source's syntax tree
  without docstrings, written back as source (``ast.unparse``: comments, docstrings and formatting do not count,
  and the hash is the same on every Python version that parses the code);
- module-level data the code reads (constants, tuples, dicts, dataclass instances such as a data split or a
  phrase list), as the hash of a canonical ``repr``.

Lambdas are followed but not recorded themselves: they are one-line dispatches (``lambda d: _build(cfg, d)``),
and one artefact is often loaded from two call sites with two such lambdas.

The source is read from disk; a module file modified after this process started may no longer be the code that
is running, so its entries are recorded as unknown (the next load in a fresh process rebuilds).

Left out on purpose: code that cannot change what a build writes (the cache itself, progress lines, logging,
validation messages, the result store), and everything outside ``icml26``: a new torch can change numerics too,
but rebuilding on every library upgrade would cost more than it catches.

    >>> from icml26.testbeds import causal_lm
    >>> fp = code_fingerprint(causal_lm.train_causal_lm)
    >>> "icml26.testbeds.training.train_steps" in fp and "icml26.testbeds.cache.load_cached" not in fp
    True
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import hashlib
import importlib
import importlib.util
import inspect
import io
import logging
import os
import sys
import textwrap
import time
import tokenize
import types
from typing import Any, Iterable

log = logging.getLogger(__name__)

PACKAGE = "icml26"
# modules whose code cannot change an artefact's contents (where it is cached, what is printed while building)
NEUTRAL = ("icml26.testbeds.cache", "icml26.testbeds.code_version", "icml26.testbeds.progress",
           "icml26.harness.store", "icml26.harness.report", "icml26.harness.provenance", "icml26.harness.text",
           "icml26.harness.figures", "icml26.harness.validate", "icml26.cli", "icml26.catalog")
MAX_OBJECTS = 2000  # a guard: a build reaching more than this many objects is fingerprinted on the first ones
_DATA = (type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset, range)


def _process_start() -> float:
    """When this process started (Linux: from /proc; elsewhere: when this module was imported)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])  # field 22, starttime, in clock ticks since boot
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


PROCESS_START = _process_start()


def code_fingerprint(*roots: Any) -> dict[str, str]:
    """``{qualified name: hash}`` for ``roots`` and every ``icml26`` function, class or module-level datum they
    reach. ``roots`` are callables, classes or modules (a module stands for every function and class defined in
    it); a root defined outside ``icml26`` is followed but not recorded itself."""
    return dict(_reachable(roots))


def fingerprint_hash(fp: dict[str, str]) -> str:
    """One short hash of a whole fingerprint (what is compared first)."""
    blob = "\n".join(f"{k} {v}" for k, v in sorted(fp.items())).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def changed(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Names of the entries added, removed or edited between two fingerprints, sorted."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def stale_entries(recorded: dict[str, str]) -> list[str]:
    """Names in a recorded fingerprint whose object today hashes differently, or no longer exists, sorted.

    The check that needs no build callable (``cache.is_cached``): every recorded entry is looked up by its
    qualified name and hashed again. A change that makes a build reach new code edits a recorded caller, so it is
    caught too."""
    return sorted(n for n, digest in recorded.items()
                  if "<locals>" not in n and _current_digest(n) != digest)  # a nested function: its parent covers it


def _lookup(name: str) -> Any:
    """The object named ``package.module.Qual.name``: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return _MISSING
        return obj
    return _MISSING


_MISSING = object()


def _current_digest(name: str) -> str | None:
    try:
        obj = _unwrap(_lookup(name))
    except Exception:  # noqa: BLE001 - an import that fails today means the recorded code is gone
        return None
    if obj is _MISSING:
        return None
    if inspect.isfunction(obj):
        return _source_digest(obj.__code__)[0]
    if inspect.isclass(obj):
        return _source_digest(obj)[0]
    return _data_digest(obj) if _is_data(obj) else None


# helper functions

def _module_name(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    return str(getattr(obj, "__module__", None) or "")


def _ours(obj: Any) -> bool:
    return _ours_name(_module_name(obj))


def _unwrap(obj: Any) -> Any:
    while isinstance(obj, functools.partial):
        obj = obj.func
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    if inspect.ismethod(obj):
        obj = obj.__func__
    try:
        return inspect.unwrap(obj) if callable(obj) else obj
    except ValueError:  # a wrapper cycle
        return obj


def _code_objects(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_objects(c)


def _is_data(v: Any) -> bool:
    return isinstance(v, _DATA) or isinstance(v, enum.Enum) or (dataclasses.is_dataclass(v) and not isinstance(v, type))


def _canon(v: Any, depth: int = 0) -> str:
    """A repr that is the same in every process (sets sorted; functions and classes by name)."""
    if depth > 6:
        return "..."
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(_canon(x, depth + 1) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_canon(k, depth + 1)}: {_canon(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return ("[" if isinstance(v, list) else "(") + ", ".join(_canon(x, depth + 1) for x in v) + ")"
    if inspect.isfunction(v) or inspect.isclass(v):
        return f"<{_module_name(v)}.{v.__qualname__}>"
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        fields = ", ".join(f"{f.name}={_canon(getattr(v, f.name), depth + 1)}" for f in dataclasses.fields(v))
        return f"{type(v).__qualname__}({fields})"
    return repr(v)


def _members(v: Any, depth: int = 0) -> Iterable[Any]:
    """Functions and classes held inside a container (a registry dict, a tuple of handlers)."""
    if depth > 3:
        return
    items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple, set, frozenset)) else ()
    for x in items:
        if inspect.isfunction(x) or inspect.isclass(x) or isinstance(x, functools.partial):
            yield x
        elif isinstance(x, (dict, list, tuple, set, frozenset)):
            yield from _members(x, depth + 1)


def _package_of(obj: Any) -> str:
    mod = sys.modules.get(_module_name(obj))
    return (getattr(mod, "__package__", None) or _module_name(obj).rpartition(".")[0]) if mod else ""


def _local_imports(obj: Any, tree: ast.AST | None) -> Iterable[Any]:
    """What ``import`` statements written inside a function bring in: the ``icml26`` modules and the names taken
    from them."""
    if tree is None:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            try:
                name = importlib.util.resolve_name("." * node.level + (node.module or ""), _package_of(obj))
            except (ImportError, ValueError):
                continue
            if not (name == PACKAGE or name.startswith(PACKAGE + ".")):
                continue
            try:
                mod = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - a module that fails to import is the build's problem, not ours
                continue
            for alias in node.names:
                if hasattr(mod, alias.name):
                    yield getattr(mod, alias.name)
                else:  # `from icml26.x import submodule`
                    sub = sys.modules.get(f"{name}.{alias.name}")
                    if sub is not None:
                        yield sub
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    try:
                        yield importlib.import_module(alias.name)
                    except Exception:  # noqa: BLE001
                        continue


def _reachable(roots: Iterable[Any]) -> list[tuple[str, str]]:
    seen: set[int] = set()
    out: list[tuple[str, str]] = []
    roots = list(roots)
    todo = list(roots)
    root_ids = {id(_unwrap(r)) for r in roots}  # a root is followed even when defined outside icml26 (a user's build)
    while todo and len(out) < MAX_OBJECTS:
        obj = _unwrap(todo.pop())
        if id(obj) in seen:
            continue
        if isinstance(obj, types.ModuleType):
            seen.add(id(obj))
            if _ours(obj) or id(obj) in root_ids:
                todo.extend(v for v in vars(obj).values()
                            if (inspect.isfunction(v) or inspect.isclass(v)) and _module_name(v) == obj.__name__)
            continue
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not (_ours(obj) or id(obj) in root_ids):
            continue
        seen.add(id(obj))
        key: Any = obj.__code__ if inspect.isfunction(obj) else obj
        digest, tree = _source_digest(key)
        if _ours(obj) and "<lambda>" not in obj.__qualname__:
            out.append((f"{_module_name(obj)}.{obj.__qualname__}", digest))
        if inspect.isclass(obj):
            todo.extend(v for v in vars(obj).values() if inspect.isfunction(_unwrap(v)) or isinstance(v, property))
            todo.extend(b for b in obj.__mro__[1:] if _ours(b))
            continue
        todo.extend(_local_imports(obj, tree))
        g = obj.__globals__
        gmod = g.get("__name__", "")
        for code in _code_objects(obj.__code__):
            for name in code.co_names:
                if name not in g:
                    continue
                v = g[name]
                if isinstance(v, types.ModuleType):
                    if _ours(v):  # `training.train_loop(...)`: the attributes read on an icml26 module
                        for n in code.co_names:
                            a = getattr(v, n, None)
                            if a is not None:
                                todo.append(a)
                                if _is_data(a) and not isinstance(a, types.ModuleType):
                                    out.append((f"{v.__name__}.{n}", _data_digest(a)))
                elif _is_data(v):
                    if _ours_name(gmod):
                        out.append((f"{gmod}.{name}", _data_digest(v)))
                    todo.extend(_members(v))
                else:
                    todo.append(v)
        for cell in obj.__closure__ or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
    return sorted(dict(out).items())


def _ours_name(mod: str) -> bool:
    return (mod == PACKAGE or mod.startswith(PACKAGE + ".")) and not mod.startswith(NEUTRAL)


def _data_digest(v: Any) -> str:
    return hashlib.sha256(_canon(v).encode()).hexdigest()[:16]


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            first = body[0].value if body and isinstance(body[0], ast.Expr) else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _without_comments(src: str) -> str:
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)]
        return " ".join(t.string for t in toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(src.split())


@functools.lru_cache(maxsize=8192)
def _source_digest(obj: Any) -> tuple[str, ast.AST | None]:
    """(hash, syntax tree) of a code object's or class's source without docstrings. Memoised on the code object
    (not the function, whose closure would be kept alive) or the class."""
    try:
        src = inspect.getsource(obj)
        path = inspect.getsourcefile(obj)
    except (OSError, TypeError):
        return "no-source", None
    try:
        if path and os.stat(path).st_mtime > PROCESS_START + 1.0:  # 1 s: the start time's resolution
            log.warning("%s changed on disk after this process started; the code fingerprint records it as "
                        "unknown, so the artefact is rebuilt by the next fresh process", path)
            return f"edited-after-start-{os.stat(path).st_mtime_ns}", None
    except OSError:
        pass
    try:
        tree = _strip_docstrings(ast.parse(textwrap.dedent(src)))
        text = ast.unparse(tree)
    except SyntaxError:  # a lambda's source is the line it sits on, not always a whole statement
        tree, text = None, _without_comments(src)
    return hashlib.sha256(text.encode()).hexdigest()[:16], tree


__all__ = ["code_fingerprint", "fingerprint_hash", "changed", "stale_entries"]
