#!/usr/bin/env python3
"""The house rules the compiler does not check (issue 31), for every crate
under crates/:

- no import cycle between a crate's top-level modules (a directory
  module's files count as one): a file's edges are the other files of its
  crate it names, in `use` lines and inline paths alike (`crate::a::b`,
  `super::c`, `self::d`, a re-export in the crate root followed to where it
  is declared); `mod` lines are not edges, and a library's root (`lib.rs`,
  its façade of `mod` and `pub use` lines) is no module of its own, while a
  binary's `main.rs` is;
- no cycle between crates (their `tidemark-*` dependencies in Cargo.toml);
- no file under crates/*/src longer than 600 lines, counting the whole file;
- rooms (`SHIPPED_CRATES`): in the crates that ship, no file over 450 lines
  (test modules aside) unless its opening comment says why it must be one
  room (the words "one room");
- layers (`LAYERS`): the storage backends never use a Store-level module;
- one door (`CRATE_DEPENDENCIES`): a transport crate's `tidemark-*`
  [dependencies] are only those listed (the gRPC server reaches the store
  and the Paimon crate through `tidemark-service`, never directly);

and for the Python SDK (clients/python/tidemark): no file over 600 lines, no
import cycle between its modules (a module's edges are the package's modules
it imports, at the top or inside a function), and its layers
(`PYTHON_LAYERS`): the Spark source's planning, table and reading modules
never import the tidemark client or its protos.

Prints every violation and exits 1 if there is one not in the known list
below (empty since issue 31; an entry that no longer occurs fails the
check too, so the list only shrinks).

    scripts/check-structure.py            # the check, as CI runs it
    scripts/check-structure.py --report   # every violation, known or not
"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Dict, List, Set

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 600
# The crates that ship (not the bench, chaos, fuzz or test kit), and the
# size past which a file of theirs must say why it is one room.
SHIPPED_CRATES = {
    "tidemark",
    "tidemark-client",
    "tidemark-console",
    "tidemark-core",
    "tidemark-paimon",
    "tidemark-proto",
    "tidemark-server",
    "tidemark-service",
    "tidemark-store",
    "tidemark-trace",
}
ROOM_LINES = 450

# Violations allowed for now (each is work left: the list only ever
# shrinks). Issue 31 emptied it, and issue 52 emptied it again after its
# room rule; keep it empty.
KNOWN: Set[str] = set()

# Per crate, (lower modules, the modules above them they must not use): the
# storage backends implement the `Backend` traits and never reach up into
# the `Store` that drives them.
LAYERS: Dict[str, List[tuple]] = {
    "tidemark-store": [
        ({"postgres", "sqlite"}, {"admin", "audit", "cache", "backup", "paimon", "store"}),
    ],
}

# Per crate, the only `tidemark-*` crates its [dependencies] may name (its
# dev-dependencies may differ): the transport reaches the application
# through `tidemark-service` alone.
CRATE_DEPENDENCIES: Dict[str, Set[str]] = {
    "tidemark-server": {"tidemark-service", "tidemark-core", "tidemark-proto", "tidemark-trace", "tidemark-net"},
}

# The Python SDK: per rule, (modules, the modules they must not import),
# dotted names inside the `tidemark` package. Executors plan nothing and
# call no tidemark: plan, table and read stay free of the client (only
# paimon.coordination talks to tidemark).
PYTHON_PACKAGE = ROOT / "clients" / "python" / "tidemark"
PYTHON_LAYERS: List[tuple] = [
    ({"paimon.plan", "paimon.table", "paimon.read", "paimon.partitions", "paimon.stream"}, {"client", "errors", "v1"}),
]

USE_BLOCK = re.compile(r"\buse\s+((?:crate|super|self)(?:::[^;]*)?);", re.S)
INLINE = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")
PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", re.S)


TOKENS = re.compile(
    r"//[^\n]*"  # a line comment
    r"|/\*.*?\*/"  # a block comment
    r'|b?r(?P<hashes>#*)".*?"(?P=hashes)'  # a raw string
    r'|b?"(?:\\.|[^"\\])*"'  # a string
    r"|b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'",  # a char (not a lifetime)
    re.S,
)


def strip_comments(text: str) -> str:
    """The code without comments, and with every string and char literal
    emptied (in one pass, so `"//"` in a string is no comment)."""

    def blank(found: re.Match) -> str:
        token = found.group(0)
        if token.startswith("/"):
            return "\n" * token.count("\n")
        return '""' if '"' in token[:3] else "' '"

    return TOKENS.sub(blank, text)


def expand(path: str) -> List[str]:
    """`crate::{a, b::{c, d}}` as `crate::a`, `crate::b::c`, `crate::b::d`."""
    path = re.sub(r"\s+", "", path)
    brace = path.find("{")
    if brace < 0:
        # `use a::b::{self}` names module a::b itself.
        return [path[: -len("::self")] if path.endswith("::self") else path]
    prefix, inner = path[:brace], path[brace + 1 : path.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    return [out for part in parts if part for out in expand(prefix + part)]


class Crate:
    def __init__(self, directory: pathlib.Path):
        self.name = directory.name
        self.src = directory / "src"
        self.files: Dict[tuple, pathlib.Path] = {}
        for path in sorted(self.src.rglob("*.rs")):
            self.files[self.module_of(path)] = path
        self.roots = [m for m in self.files if m == ()]

    def module_of(self, path: pathlib.Path) -> tuple:
        parts = list(path.relative_to(self.src).with_suffix("").parts)
        if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
            parts = parts[:-1]
        if len(parts) >= 2 and parts[0] == "bin":
            return ("bin",) + tuple(parts[1:])
        return tuple(parts)

    def resolve(self, module: tuple, path: str, seen=None) -> tuple:
        """The file (module path) a `crate::`/`super::`/`self::` path lands
        in: the longest module prefix that is a file, re-exports of the
        crate root followed."""
        segments = path.split("::")
        if segments[0] == "crate":
            base: List[str] = []
        else:
            base = list(module)
            # A file `a/b.rs` is module a::b; `super` is `a`, `self` is a::b.
        rest = segments
        if rest[0] == "crate":
            rest = rest[1:]
        else:
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        full = base + [s for s in rest if s not in ("*",)]
        for n in range(len(full), -1, -1):
            candidate = tuple(full[:n])
            if candidate in self.files:
                if n < len(full):
                    # An item of that module: follow a `use` of it there to
                    # where it is declared.
                    target = self.reexport(candidate, full[n], seen if seen is not None else set())
                    if target is not None:
                        return target
                return candidate
        return ()

    def reexport(self, module: tuple, name: str, seen: set):
        """Where an item `module` brings in with a `use` (`use a::b::Name`,
        `pub use a::*` whose file declares it) is declared; None when
        `module` declares it itself."""
        if (module, name) in seen:
            return None
        seen.add((module, name))
        text = strip_comments(self.files[module].read_text())
        if declares(self.files[module], name, private=True):
            return None
        children = {m[len(module)] for m in self.files if len(m) > len(module) and m[: len(module)] == module}
        top = {m[0] for m in self.files if m}
        for block in re.findall(r"\buse\s+([^;]+);", text):
            for path in expand(block):
                original, _, alias = path.partition(" as ")
                head = original.split("::")[0]
                if head in ("crate", "super", "self"):
                    full = original
                elif head in children:
                    full = "self::" + original
                elif module == () and head in top:
                    full = "crate::" + original
                else:
                    continue
                last = original.split("::")[-1]
                if (alias or last) == name:
                    return self.resolve(module, full, seen)
                if last == "*":
                    target = self.resolve(module, full[: -len("::*")], seen)
                    if target != module and declares(self.files[target], name):
                        return target
        return None

    def edges(self) -> Dict[tuple, Set[tuple]]:
        graph: Dict[tuple, Set[tuple]] = {m: set() for m in self.files}
        top = {m[0] for m in self.files if m}
        for module, path in self.files.items():
            text = strip_comments(path.read_text())
            # Each path with the module it is written in: inside an inline
            # `mod tests { … }`, `super` is the file's own module.
            spans = inline_modules(text)
            paths: List[tuple] = []
            for found in USE_BLOCK.finditer(text):
                inner = inside(spans, found.start())
                paths += [(inner, p) for p in expand(found.group(1))]
            paths += [(inside(spans, f.start()), f.group(1)) for f in INLINE.finditer(text)]
            if module == ():
                if path.name == "lib.rs":
                    # A library's root is its façade: `mod` and `pub use`
                    # lines, not a module that depends on the others.
                    continue
                # A binary's `main.rs` uses its modules as any file does.
                for block in re.findall(r"\buse\s+([^;]+);", text):
                    for p in expand(block):
                        if p.split("::")[0] in top:
                            paths.append(((), "crate::" + p))
            for inner, p in paths:
                target = self.resolve(module + inner, p.split(" as ")[0])
                if target != module:
                    graph[module].add(target)
        return graph


def inline_modules(text: str) -> List[tuple]:
    """The inline modules of a file (`mod name { … }`): (start, end, name)."""
    text = re.sub(r"'[{}]'", "' '", text)  # char literals keep the length
    spans = []
    for found in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
        depth, end = 0, len(text)
        for i in range(found.end() - 1, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        spans.append((found.end(), end, found.group(1)))
    return spans


def inside(spans: List[tuple], position: int) -> tuple:
    """The inline modules `position` is in, outermost first."""
    return tuple(name for start, end, name in spans if start <= position < end)


def declares(path: pathlib.Path, name: str, private: bool = False) -> bool:
    """Whether the file declares `name` (public items only, unless
    `private`), not counting a `use`."""
    text = strip_comments(path.read_text())
    visibility = r"(?:pub(?:\([^)]*\))?\s+)?" if private else r"pub(?:\([^)]*\))?\s+"
    kinds = r"(?:async\s+)?(?:struct|enum|fn|trait|type|const|static|mod|macro_rules!)"
    return re.search(rf"(?m)^\s*{visibility}{kinds}\s*{re.escape(name)}\b", text) is not None


def cycles(graph: Dict[tuple, Set[tuple]]) -> List[List[tuple]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: Dict[tuple, int] = {}
    low: Dict[tuple, int] = {}
    stack: List[tuple] = []
    on_stack: Set[tuple] = set()
    found: List[List[tuple]] = []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def is_test_module(path: pathlib.Path) -> bool:
    return path.stem == "tests" or "tests" in path.parent.parts


def opening_comment(text: str) -> str:
    """A file's opening `//!` comment, joined into one line of words."""
    words = []
    for line in text.splitlines():
        if not line.startswith("//!"):
            break
        words.append(line[3:].strip())
    return " ".join(words)


def crate_dependencies(sections_named=("dependencies]", "build-dependencies]")) -> Dict[str, Set[str]]:
    deps: Dict[str, Set[str]] = {}
    for manifest in sorted((ROOT / "crates").glob("*/Cargo.toml")):
        text = manifest.read_text()
        sections = re.split(r"^\[", text, flags=re.M)
        names = set()
        for section in sections:
            if section.startswith(sections_named):
                names |= set(re.findall(r"^(tidemark[\w-]*)\s*[=.]", section, flags=re.M))
        deps[manifest.parent.name] = names
    return deps


def violations() -> List[str]:
    found = []
    for directory in sorted((ROOT / "crates").iterdir()):
        if not (directory / "src").is_dir():
            continue
        crate = Crate(directory)
        graph = crate.edges()
        # Between top-level modules (a directory module's files are one).
        top: Dict[tuple, Set[tuple]] = {}
        for module, targets in graph.items():
            top.setdefault(module[:1], set()).update(t[:1] for t in targets if t[:1] != module[:1])
        for component in cycles(top):
            names = ["(root)" if m == () else m[0] for m in component]
            found.append(f"cycle in {crate.name}: " + " ".join(names))
        # Inside a directory module, between its files (the parent's own
        # file, which declares them, left out): a U-turn such as
        # keys -> group_commit -> keys.
        for parent in sorted({m[:-1] for m in crate.files if len(m) >= 2}):
            depth = len(parent) + 1
            inner: Dict[tuple, Set[tuple]] = {}
            for module, targets in graph.items():
                if len(module) >= depth and module[: depth - 1] == parent:
                    inner.setdefault(module[:depth], set()).update(
                        t[:depth] for t in targets if len(t) >= depth and t[: depth - 1] == parent and t[:depth] != module[:depth]
                    )
            for component in cycles(inner):
                found.append(f"cycle in {crate.name}::{'::'.join(parent)}: " + " ".join(m[-1] for m in component))
        # Layers: a module of a lower layer never names one above it.
        for lower, upper in LAYERS.get(crate.name, []):
            for module, targets in graph.items():
                if module[:1] and module[0] in lower:
                    for target in sorted(t for t in targets if t[:1] and t[0] in upper):
                        found.append(
                            f"layering in {crate.name}: {'::'.join(module)} uses {'::'.join(target)}"
                        )
        for path in crate.files.values():
            text = path.read_text()
            lines = len(text.splitlines())
            if lines > MAX_LINES:
                found.append(f"over {MAX_LINES} lines: {path.relative_to(ROOT)}")
            elif lines > ROOM_LINES and crate.name in SHIPPED_CRATES and not is_test_module(path):
                if "one room" not in opening_comment(text).lower():
                    found.append(f"over {ROOM_LINES} lines without saying why it is one room: {path.relative_to(ROOT)}")
    deps = crate_dependencies()
    for component in cycles({(k,): {(d,) for d in v} for k, v in deps.items()}):
        found.append("cycle between crates: " + " ".join(m[0] for m in component))
    direct = crate_dependencies(("dependencies]",))
    for crate, allowed in sorted(CRATE_DEPENDENCIES.items()):
        for extra in sorted(direct.get(crate, set()) - allowed):
            found.append(f"{crate} depends on {extra}: only {', '.join(sorted(allowed))} (one door)")
    return found


def python_modules() -> Dict[str, pathlib.Path]:
    """The package's modules by dotted name (`paimon.plan`; a package by its
    own name, the root package as "")."""
    modules = {}
    for path in sorted(PYTHON_PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PYTHON_PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def python_imports(name: str, path: pathlib.Path, known: Set[str]) -> Set[str]:
    """The package modules (or generated ones, such as `v1`) `name` imports."""
    import ast

    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".") if name else []
    targets: Set[str] = set()

    def resolve(dotted: str) -> str:
        # The longest known module the dotted path names; `v1...` (generated
        # stubs) by its first part.
        parts = dotted.split(".") if dotted else []
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in known:
                return ".".join(parts[:end])
        return parts[0] if parts else ""

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tidemark" or alias.name.startswith("tidemark."):
                    targets.add(resolve(alias.name[len("tidemark."):] if "." in alias.name else ""))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "tidemark" or (node.module or "").startswith("tidemark."):
                module = node.module[len("tidemark."):] if "." in node.module else ""
            else:
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}" if module else alias.name
                targets.add(full if full in known else resolve(module))
    targets.discard(name)
    return targets


def python_violations() -> List[str]:
    found = []
    modules = python_modules()
    graph = {(name,): {(t,) for t in python_imports(name, path, set(modules))} for name, path in modules.items()}
    for component in cycles(graph):
        found.append("cycle in the Python SDK: " + " ".join(m[0] or "(root)" for m in component))
    for lower, forbidden in PYTHON_LAYERS:
        for (module,), targets in sorted(graph.items()):
            if module in lower:
                for (target,) in sorted(targets):
                    if target.split(".")[0] in forbidden:
                        found.append(f"layering in the Python SDK: {module} imports {target}")
    for path in modules.values():
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"over {MAX_LINES} lines: {path.relative_to(ROOT)}")
    return found


def main() -> int:
    found = violations() + python_violations()
    report = "--report" in sys.argv
    new = [v for v in found if v not in KNOWN]
    gone = sorted(KNOWN - set(found))
    for v in found if report else new:
        print(v)
    for v in gone:
        print(f"fixed, remove it from KNOWN in {pathlib.Path(__file__).name}: {v}")
    if not report:
        print(f"structure: {len(found)} violation(s), {len(found) - len(new)} known, {len(new)} new")
    return 1 if (new or gone) and not report else 0


if __name__ == "__main__":
    sys.exit(main())
