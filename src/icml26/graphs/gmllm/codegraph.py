"""Code graph of a Python project, built by parsing only (``ast``), never importing or executing [A04].

Nodes: ``module`` (one per file), ``class``, ``function`` (methods included) and ``string`` (suspicious-looking
literals: URLs and base64-like strings of length >= 16). Typed, directed edges:

    contains   module -> class/function, class -> method, function -> nested function
    call       caller function -> callee function (names resolved through the enclosing function scopes for
               nested functions, then the file's top level and imports, cross-file)
    import     module -> imported project module
    reference  function -> project function it names without calling (e.g. passes as a callback)
    flow       function g -> function f when g's result reaches a call of f (f(g(...)) or x = g(...); f(x))
    uses       scope (function, class or module) -> string literal it contains (the only edge into a string)

Behaviour tags (GuardDog-style categories) come from the calls a function makes (``BEHAVIOURS``).
"""

from __future__ import annotations

import ast
import logging
import math
import re
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from icml26.harness import validate

log = logging.getLogger(__name__)

NODE_TYPES = ("module", "class", "function", "string")
EDGE_TYPES = ("contains", "call", "import", "reference", "flow", "uses")

# behaviour categories -> dotted call names or final attribute names (bandit / GuardDog-style rules)
BEHAVIOURS: dict[str, tuple[str, ...]] = {
    "network": ("urlopen", "urlretrieve", "Request", "HTTPConnection", "HTTPSConnection", "socket", "connect",
                "create_connection", "post", "sendall"),
    "exec": ("exec", "eval", "compile", "__import__", "execfile"),
    "decode": ("b64decode", "b64encode", "b32decode", "a85decode", "decompress", "unhexlify", "fromhex",
               "rot13", "chr", "codecs.decode"),
    "env": ("environ", "getenv", "gethostname", "getuser", "getlogin", "uname", "node"),
    "file_read": ("expanduser", "read_text", "read_bytes"),
    "process": ("system", "popen", "Popen", "run", "call", "check_output", "spawn", "execv", "fork"),
    "persistence": ("crontab", "startup", "autostart", "chmod", "write_text"),
}
#: call names tagged ``decode`` that *encode*: they transform data already in hand and reveal nothing hidden,
#: so a taint rule treats them as transforms that pass taint on, never as sources (``reproduce.taint_count``)
ENCODERS = ("b64encode",)
TAGS = tuple(BEHAVIOURS)
_CALL_TO_TAG = {name: tag for tag, names in BEHAVIOURS.items() for name in names}
_B64 = re.compile(r"^[A-Za-z0-9+/=]{16,}$")
_URL = re.compile(r"^[a-z]+://", re.I)


@dataclass
class CodeNode:
    id: int
    kind: str                 # one of NODE_TYPES
    name: str                 # qualified name, e.g. "pkg/mod.py::Class.method"
    file: str
    lineno: int
    end_lineno: int
    text: str = ""            # identifiers, call names and literals used by the encoder (not the raw source)
    tags: set = field(default_factory=set)
    depth: int = 0
    calls: tuple = ()         # dotted names of the calls made directly in this scope, in source order


@dataclass
class CodeGraph:
    """Parsed project: nodes, typed edges, sources (for context windows) and files skipped with the reason."""

    nodes: list[CodeNode]
    edges: list[tuple[int, int, str]]
    sources: dict[str, str]
    skipped: dict[str, str]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def functions(self) -> list[CodeNode]:
        return [n for n in self.nodes if n.kind == "function"]

    def edge_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(edge_index [2, E], edge_type [E])`` with edge types numbered as in ``EDGE_TYPES``."""
        if not self.edges:
            return np.zeros((2, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)
        a = np.array([(s, d, EDGE_TYPES.index(t)) for s, d, t in self.edges], dtype=np.int64)
        return a[:, :2].T.copy(), a[:, 2].copy()

    def node_by_name(self, name: str) -> CodeNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}")

    def source_of(self, node: CodeNode) -> str:
        lines = self.sources[node.file].splitlines()
        return "\n".join(lines[node.lineno - 1: node.end_lineno])

    def to_networkx(self):
        """A ``networkx.MultiDiGraph`` with node attributes (kind, name, file, lineno, tags) and edge ``type``."""
        import networkx as nx

        g = nx.MultiDiGraph()
        for n in self.nodes:
            g.add_node(n.id, kind=n.kind, name=n.name, file=n.file, lineno=n.lineno, tags=sorted(n.tags))
        for s, d, t in self.edges:
            g.add_edge(s, d, type=t)
        return g


# helper functions

def _dotted(node: ast.AST) -> str:
    """Dotted name of a call target (``a.b.c``), '' when not a plain name/attribute chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ".".join(reversed(parts))


def _module_name(path: str) -> str:
    p = path[:-3] if path.endswith(".py") else path
    p = p.replace("\\", "/").replace("/", ".")
    return p[:-9] if p.endswith(".__init__") else p


def _ident_words(s: str) -> str:
    return " ".join(w.lower() for w in re.findall(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+", s))


def tags_of_call(dotted: str) -> set[str]:
    """Behaviour tags of one call name (matched on the dotted name and its last component)."""
    out = set()
    if dotted in _CALL_TO_TAG:
        out.add(_CALL_TO_TAG[dotted])
    last = dotted.rsplit(".", 1)[-1]
    if last in _CALL_TO_TAG:
        out.add(_CALL_TO_TAG[last])
    if "environ" in dotted:
        out.add("env")
    return out


_SKIP = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Name, ast.Pass, ast.alias)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _FileParser:
    """One iterative pass over one file's AST: scopes, calls, imports, string literals and simple data flow.

    (An explicit stack instead of ``ast.NodeVisitor``: about 3x faster, which the whole-stdlib build needs.)
    """

    def __init__(self, path: str) -> None:
        self.path, self.mod = path, _module_name(path)
        self.items: list[dict] = []          # module/class/function/string records (local ids = list index)
        self.imports: dict[str, str] = {}    # local alias -> dotted target ("pkg.mod" or "pkg.mod.func")
        self.calls: list[tuple[int, str]] = []       # (caller item, dotted callee)
        self.refs: list[tuple[int, str]] = []        # (function item, name passed as an argument)
        self.flows: list[tuple[int, str, str]] = []  # (function item, producer callee, consumer callee)

    def _add(self, kind: str, name: str, node: ast.AST, parent: int | None, depth: int, text: str = "") -> int:
        lineno = getattr(node, "lineno", 1)
        self.items.append(dict(kind=kind, name=name, lineno=lineno, end_lineno=getattr(node, "end_lineno", lineno),
                               parent=parent, text=text, tags=set(), depth=depth, calls=[]))
        return len(self.items) - 1

    def run(self, tree: ast.Module, n_lines: int) -> "_FileParser":
        mod = self._add("module", self.path, tree, None, 0)
        self.items[mod]["end_lineno"] = max(n_lines, 1)
        # stack entries: (node, scope item, qualified prefix, assigned-variable map of the enclosing function)
        stack: list[tuple[ast.AST, int, str, dict]] = [(tree, mod, "", {})]
        while stack:                                  # pre-order, source order: assignments precede their uses
            node, scope, prefix, assigned = stack.pop()
            if isinstance(node, _SCOPES):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                words = _ident_words(node.name)
                if kind == "function":
                    words += " " + " ".join(_ident_words(a.arg) for a in node.args.args + node.args.kwonlyargs)
                prefix = f"{prefix}.{node.name}" if prefix else node.name
                scope = self._add(kind, f"{self.path}::{prefix}", node, scope, self.items[scope]["depth"] + 1, words)
                assigned = {}
            elif node is not tree:
                self._handle(node, scope, assigned)
            children = []
            for f in node._fields:
                v = getattr(node, f, None)
                if isinstance(v, list):
                    children.extend(x for x in v if isinstance(x, ast.AST) and not isinstance(x, _SKIP))
                elif isinstance(v, ast.AST) and not isinstance(v, _SKIP):
                    children.append(v)
            stack.extend((c, scope, prefix, assigned) for c in reversed(children))
        return self

    def _handle(self, node: ast.AST, cur: int, assigned: dict) -> None:
        if isinstance(node, ast.Call):
            callee = _dotted(node.func)
            if not callee:
                return
            self.calls.append((cur, callee))
            it = self.items[cur]
            it["tags"] |= tags_of_call(callee)
            it["text"] += " call_" + callee.replace(".", "_")
            it["calls"].append(callee)
            for arg in node.args + [k.value for k in node.keywords]:
                if isinstance(arg, ast.Call):
                    prod = _dotted(arg.func)
                    if prod:
                        self.flows.append((cur, prod, callee))
                elif isinstance(arg, ast.Name):
                    if arg.id in assigned:
                        self.flows.append((cur, assigned[arg.id], callee))
                    else:
                        self.refs.append((cur, arg.id))
        elif isinstance(node, ast.Assign):
            if isinstance(node.value, ast.Call):
                prod = _dotted(node.value.func)
                if prod:
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            assigned[t.id] = prod
        elif isinstance(node, ast.Attribute):
            if node.attr == "environ":
                self.items[cur]["tags"].add("env")
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str) and len(v) >= 16 and (_URL.match(v) or _B64.match(v)):
                url = bool(_URL.match(v))
                i = self._add("string", f"{self.items[cur]['name']}#str{node.lineno}:{node.col_offset}", node, cur,
                              self.items[cur]["depth"] + 1, "str_url" if url else "str_b64")
                self.items[i]["tags"].add("url" if url else "b64_literal")
        elif isinstance(node, ast.Import):
            for a in node.names:
                self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = self.mod.split(".")
                keep = len(pkg) - node.level + (1 if self.path.endswith("__init__.py") else 0)
                base = ".".join(pkg[:max(keep, 0)] + ([node.module] if node.module else []))
            for a in node.names:
                self.imports[a.asname or a.name] = f"{base}.{a.name}" if base else a.name


def _parse_one(item: tuple[str, str]) -> tuple[str, _FileParser | None, str]:
    path, src = item
    try:
        tree = ast.parse(src.removeprefix("\ufeff"), filename=path)   # a UTF-8 BOM read as text is not code
    except (SyntaxError, ValueError) as e:   # ValueError: null bytes
        return path, None, f"{type(e).__name__}: {e}"
    return path, _FileParser(path).run(tree, src.count("\n") + 1), ""


# main entry point

def build_code_graph(files: Mapping[str, str], *, n_jobs: int = 1) -> CodeGraph:
    """Parse a project given as ``{relative_path: source}`` into a :class:`CodeGraph` [A04].

    Files are parsed with ``ast.parse`` only: nothing is imported or executed. A file with a syntax error is
    skipped and listed in ``CodeGraph.skipped`` (with a logged warning). ``n_jobs > 1`` parses in processes.
    Raises ``ValueError`` for an empty project or one where no file parses.
    """
    if not isinstance(files, Mapping):
        raise TypeError(f"files must be a mapping {{relative_path: source}}, got {type(files).__name__}")
    if not files:
        raise ValueError("empty project: no Python files given (pass {path: source} with at least one file)")
    for k, v in files.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"file paths and sources must be str; got {type(k).__name__} -> {type(v).__name__}")
    n_jobs = validate.positive_int("n_jobs", n_jobs)
    items = sorted(files.items())
    if n_jobs > 1 and len(items) > 50:
        with ProcessPoolExecutor(n_jobs) as ex:
            parsed = list(ex.map(_parse_one, items, chunksize=32))
    else:
        parsed = [_parse_one(it) for it in items]
    skipped = {p: why for p, fp, why in parsed if fp is None}
    for p, why in skipped.items():
        log.warning("skipped %s (%s)", p, why)
    ok = [(p, fp) for p, fp, _ in parsed if fp is not None]
    if not ok:
        raise ValueError(f"no file of the project parses ({len(skipped)} skipped: {sorted(skipped)[:3]}...)")

    nodes: list[CodeNode] = []
    offset: dict[str, int] = {}
    for path, fp in ok:
        offset[path] = len(nodes)
        for it in fp.items:
            nodes.append(CodeNode(len(nodes), it["kind"], it["name"], path, it["lineno"], it["end_lineno"],
                                  it["text"], it["tags"], it["depth"], tuple(it["calls"])))
    # resolution tables: dotted module name -> module node; "mod.func" / "mod.Class" -> node
    by_module = {fp.mod: offset[p] for p, fp in ok}
    top_level: dict[str, int] = {}
    for path, fp in ok:
        for j, it in enumerate(fp.items):
            if it["kind"] in ("function", "class") and it["depth"] == 1:
                top_level[f"{fp.mod}.{it['name'].split('::', 1)[1]}"] = offset[path] + j
    edges: set[tuple[int, int, str]] = set()
    for path, fp in ok:
        base = offset[path]
        local = {it["name"].split("::", 1)[1]: base + j for j, it in enumerate(fp.items)
                 if it["kind"] in ("function", "class") and it["depth"] == 1}

        methods: dict[str, list[int]] = defaultdict(list)
        nested: dict[tuple[int, str], int] = {}      # (enclosing function item, short name) -> nested def
        for j, it in enumerate(fp.items):
            if it["kind"] == "function" and it["depth"] >= 2:
                methods[it["name"].rsplit(".", 1)[-1]].append(base + j)
            par = it["parent"]
            if it["kind"] in ("function", "class") and par is not None and fp.items[par]["kind"] == "function":
                nested[(par, it["name"].rsplit(".", 1)[-1])] = base + j

        def resolve(dotted: str, scope: int | None = None) -> int | None:
            if scope is not None and "." not in dotted:
                # Python's scoping: a name defined in this or an enclosing *function* (class bodies do not
                # enclose their methods) shadows the module's top level
                s = scope
                while s is not None:
                    if fp.items[s]["kind"] == "function" and (s, dotted) in nested:
                        return nested[(s, dotted)]
                    s = fp.items[s]["parent"]
            if dotted in local:
                return local[dotted]
            if dotted.startswith("self.") and dotted.count(".") == 1:
                cands = methods.get(dotted[5:], [])
                return cands[0] if len(cands) == 1 else None
            head, _, rest = dotted.partition(".")
            if head in fp.imports:
                target = fp.imports[head] + ("." + rest if rest else "")
                if target in top_level:
                    return top_level[target]
                if target in by_module:
                    return by_module[target]
            return None

        for j, it in enumerate(fp.items):
            if it["parent"] is not None:
                edges.add((base + it["parent"], base + j, "contains" if it["kind"] != "string" else "uses"))
        for target in set(fp.imports.values()):
            for cand in (target, target.rsplit(".", 1)[0]):
                if cand in by_module and by_module[cand] != base:
                    edges.add((base, by_module[cand], "import"))
                    break
        for caller, callee in fp.calls:
            d = resolve(callee, caller)
            if d is not None and d != base + caller:
                edges.add((base + caller, d, "call"))
        for f, name in fp.refs:
            d = resolve(name, f)
            if d is not None and nodes[d].kind == "function":
                edges.add((base + f, d, "reference"))
        for _f, producer, consumer in fp.flows:
            s = resolve(producer, _f)
            if s is None or nodes[s].kind != "function":
                continue
            d = resolve(consumer, _f)
            if d is not None and d != s:
                edges.add((s, d, "flow"))
            elif d is None and tags_of_call(consumer):
                # producer's result reaches a behaviour sink: the sink is the consuming function itself
                edges.add((s, base + _f, "flow"))
    return CodeGraph(nodes, sorted(edges), dict(files), skipped)


def read_project(root: str | Path, max_files: int | None = None) -> dict[str, str]:
    """Read ``*.py`` files under ``root`` as text (``{relative_path: source}``); nothing is imported."""
    if max_files is not None:
        max_files = validate.positive_int("max_files", max_files)
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    out = {}
    for p in sorted(root.rglob("*.py")):
        if "site-packages" in p.parts:
            continue
        out[p.relative_to(root).as_posix()] = p.read_text(encoding="utf-8", errors="replace")
        if max_files and len(out) >= max_files:
            break
    return out


def structure_dim() -> int:
    """Width of :func:`degree_features` (the last columns of a node's features in ``model.to_pyg``)."""
    return len(NODE_TYPES) + 3 + len(TAGS) + 2


def degree_columns() -> slice:
    """The columns of :func:`degree_features` that are computed from the edges (log in / out degree)."""
    return slice(len(NODE_TYPES), len(NODE_TYPES) + 2)


def degree_features(g: CodeGraph) -> np.ndarray:
    """Structure features per node: type one-hot, log(1 + in/out degree), depth, behaviour-tag multi-hot."""
    n = g.num_nodes
    f = np.zeros((n, structure_dim()), dtype=np.float32)
    deg_in, deg_out = np.zeros(n), np.zeros(n)
    for s, d, _ in g.edges:
        deg_out[s] += 1
        deg_in[d] += 1
    for node in g.nodes:
        i = node.id
        f[i, NODE_TYPES.index(node.kind)] = 1.0
        f[i, len(NODE_TYPES)] = math.log1p(deg_in[i])
        f[i, len(NODE_TYPES) + 1] = math.log1p(deg_out[i])
        f[i, len(NODE_TYPES) + 2] = node.depth / 4.0
        for t in node.tags:
            if t in TAGS:
                f[i, len(NODE_TYPES) + 3 + TAGS.index(t)] = 1.0
            elif t == "url":
                f[i, -2] = 1.0
            elif t == "b64_literal":
                f[i, -1] = 1.0
    return f


def iter_stdlib_files() -> Iterable[tuple[str, Path]]:
    """(relative path, path) of the running interpreter's standard-library ``.py`` files, sorted."""
    from icml26.testbeds.code_corpus import stdlib_root

    root = stdlib_root()
    for p in sorted(root.rglob("*.py")):
        if "site-packages" in p.parts:
            continue
        yield p.relative_to(root).as_posix(), p
