#!/usr/bin/env python3
"""Finds import circles among sibling Rust modules; standard library only.

For every folder of Rust sources in the workspace (a module with its children: `x.rs` or
`x/mod.rs`), builds the graph of the children's dependencies on each other and on the parent
module, and prints every strongly connected component of more than one member, one a line:

    engine/src/ruststream: broker, message, queue

An edge A -> B means A's source (A's file and every file below it) names a path into B:
`crate::<path of B>::...`, `super::B::...`, `super::super::...`, a `use` of any of them, or a
bare `B::...` where B is a child of the module naming it. A child naming `super::X`, where X is
an item of the parent, depends on the parent (`<parent>` in the output), unless the parent
merely re-exports X from a sibling (then the edge goes to that sibling) or imports it from
another crate (then there is no edge). The parent depends on a child only through code and
private `use`s: its `mod` declarations and `pub use` re-exports do not count, so a parent
re-exporting its children is no circle by itself.

Comments and string literals are left out, so intra-doc links are no dependency, and so are
modules under `#[cfg(test)]` or `#[cfg(all(test, ...))]`, inline or in files of their own: a
unit test may build on any module, as a dev-dependency may. `#[path]` attributes are not
followed.

Usage: import-circles.py [WORKSPACE] [-v]; -v also prints the edges within each circle. Exits
1 when there is any circle, 0 otherwise.
"""

import argparse
import re
import sys
from pathlib import Path

PARENT = "<parent>"
SKIP_DIRS = {"target", "peer-examples", ".git", "node_modules"}
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
RAW_RE = re.compile(r'r(#*)"')
PATH_ATTR_RE = re.compile(r"#\s*\[\s*path\s*=[^\]]*\]\s*(#\s*\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s*)?$")


def strip(text):
    """Blanks comments, string and char literals, keeping braces and newlines elsewhere."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and RAW_RE.match(text, i) and not (i and re.match(r"\w", text[i - 1])):
            m = RAW_RE.match(text, i)
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                i += len(m.group(0))
                out.append("' '")
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_MOD_RE = re.compile(
    r"#\s*\[\s*cfg\s*\(\s*(?:test|all\s*\(\s*test\b[^\]]*\))\s*\)\s*\]\s*(?:#\s*\[[^\]]*\]\s*)*"
    r"(?:pub(?:\([^)]*\))?\s*)?mod\s+" + IDENT + r"\s*(?P<end>[;{])"
)


def drop_test_modules(text):
    """Blanks test-only `mod name { ... }` blocks and `mod name;` lines."""
    while True:
        m = TEST_MOD_RE.search(text)
        if not m:
            return text
        end = m.end()
        if m.group("end") == "{":
            depth = 1
            while end < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
        text = text[:m.start()] + " " + text[end:]


USE_RE = re.compile(r"(?P<vis>\bpub\s*(\([^)]*\))?\s*)?\buse\s+(?P<tree>[^;]*);")
PATH_RE = re.compile(r"(?<![\w:])(\$?crate|super|self)((?:\s*::\s*" + IDENT + r")+)")
MOD_OPEN_RE = re.compile(r"\bmod\s+(" + IDENT + r")\s*\{")


def parse_use_tree(tree):
    """Expands a `use` tree into ((segments, alias or None), is_glob) for each leaf."""
    tree = tree.strip()
    results = []

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        return [p.strip() for p in parts if p.strip()]

    def expand(prefix, s):
        for part in split_top(s):
            brace = part.find("{")
            if brace >= 0:
                head = part[:brace].replace(" ", "")
                segs = [x for x in head.split("::") if x]
                expand(prefix + segs, part[brace + 1:part.rfind("}")])
                continue
            alias = None
            m = re.match(r"^(.*?)\s+as\s+(" + IDENT + r")$", part)
            if m:
                part, alias = m.group(1), m.group(2)
            segs = [x for x in part.replace(" ", "").split("::") if x]
            if segs and segs[-1] == "*":
                results.append(((prefix + segs[:-1], None), True))
            elif segs == ["self"]:
                results.append(((prefix, alias), False))
            else:
                results.append(((prefix + segs, alias), False))

    expand([], tree.lstrip(":"))
    return results


class Crate:
    """The files of one crate, each with its module path, and their text without comments,
    literals and test modules."""

    def __init__(self, root_file):
        self.files = {}  # module path tuple -> file
        self.texts = {}  # module path tuple -> stripped text
        self.walk(root_file, ())

    def walk(self, file, modpath):
        try:
            text = drop_test_modules(strip(file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            return
        self.files[modpath] = file
        self.texts[modpath] = text
        if file.name in ("mod.rs", "lib.rs", "main.rs") or modpath == ():
            base = file.parent
        else:
            base = file.parent / file.stem
        for m in re.finditer(r"(?<![\w])mod\s+(" + IDENT + r")\s*;", text):
            name = m.group(1)
            # a declaration carrying #[path] is not followed
            before = text[max(0, m.start() - 200):m.start()]
            if PATH_ATTR_RE.search(before):
                continue
            for cand in (base / f"{name}.rs", base / name / "mod.rs"):
                if cand.is_file():
                    self.walk(cand, modpath + (name,))
                    break


def references(text, filepath, children_of):
    """Yields (absolute path, kind, module, name) for every path the file names: kind is
    'use', 'pub use', 'code', or 'extern use' (with no path) for another crate's item; module
    the (inline) module the path is named in; name what a `use` binds. A bare path is resolved
    against children_of(module)."""
    # Track inline modules: brace depth and the mod stack.
    depth = 0
    stack = []  # (name, depth at open)
    mod_starts = {m.end() - 1: m.group(1) for m in MOD_OPEN_RE.finditer(text)}
    scopes = []  # (start, end, module path) computed by scanning
    cur_start = 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
            if i in mod_starts:
                scopes.append((cur_start, i, tuple(filepath) + tuple(s[0] for s in stack)))
                stack.append((mod_starts[i], depth))
                cur_start = i
        elif ch == "}":
            if stack and stack[-1][1] == depth:
                scopes.append((cur_start, i, tuple(filepath) + tuple(s[0] for s in stack)))
                stack.pop()
                cur_start = i
            depth -= 1
    scopes.append((cur_start, len(text), tuple(filepath) + tuple(s[0] for s in stack)))

    def module_at(pos):
        for s, e, p in scopes:
            if s <= pos <= e:
                return p
        return tuple(filepath)

    def absolute(segs, here):
        segs = list(segs)
        if not segs:
            return None
        head = segs[0].lstrip("$")
        if head == "crate":
            return tuple(segs[1:])
        if head in ("self", "super"):
            base = list(here)
            while segs and segs[0] in ("self", "super"):
                if segs[0] == "super":
                    if not base:
                        return None
                    base.pop()
                segs.pop(0)
            return tuple(base + segs)
        if head in children_of(here):
            return tuple(here) + tuple(segs)
        return None

    use_spans = []
    for m in USE_RE.finditer(text):
        here = module_at(m.start())
        kind = "pub use" if m.group("vis") else "use"
        use_spans.append((m.start(), m.end()))
        for (segs, alias), glob in parse_use_tree(m.group("tree")):
            p = absolute(segs, here)
            name = None if glob else (alias or (segs[-1] if segs else None))
            if p is not None:
                yield p, kind, here, name
            elif name and name != "self":
                # another crate's item: no module of this one
                yield None, "extern use", here, name

    def in_use(pos):
        return any(s <= pos < e for s, e in use_spans)

    for m in PATH_RE.finditer(text):
        if in_use(m.start()):
            continue
        segs = [m.group(1)] + [x.strip() for x in m.group(2).split("::") if x.strip()]
        p = absolute(segs, module_at(m.start()))
        if p is not None:
            yield p, "code", module_at(m.start()), None
    bare = re.compile(r"(?<![\w:$])(" + IDENT + r")\s*::\s*(" + IDENT + r")")
    for m in bare.finditer(text):
        if in_use(m.start()) or m.group(1) in ("crate", "self", "super"):
            continue
        here = module_at(m.start())
        if m.group(1) in children_of(here):
            yield tuple(here) + (m.group(1), m.group(2)), "code", here, None


def crate_roots(workspace):
    roots = []
    for cargo in workspace.rglob("Cargo.toml"):
        pkg = cargo.parent
        if any(part in SKIP_DIRS for part in pkg.relative_to(workspace).parts):
            continue
        for f in [pkg / "src" / "lib.rs", pkg / "src" / "main.rs"]:
            if f.is_file():
                roots.append(f)
        for sub in ("src/bin", "tests", "examples", "benches"):
            d = pkg / sub
            if not d.is_dir():
                continue
            for f in sorted(d.iterdir()):
                if f.suffix == ".rs" and f.is_file():
                    roots.append(f)
                elif f.is_dir() and (f / "main.rs").is_file():
                    roots.append(f / "main.rs")
    return roots


def sccs(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def analyse(workspace, root):
    crate = Crate(root)
    texts = crate.texts
    modules = set(crate.files)

    def children_of(path):
        path = tuple(path)
        return {p[-1] for p in modules if len(p) == len(path) + 1 and p[: len(path)] == path}

    refs = {p: list(references(texts[p], p, children_of)) for p in texts}
    # What each module's `use`s bind: module path -> {name: absolute path}
    bound = {}
    for p, rs in refs.items():
        for target, kind, here, name in rs:
            if kind in ("use", "pub use", "extern use") and name and here == p:
                bound.setdefault(p, {})[name] = target

    def resolve(target, seen=()):
        """Follows `use` bindings: module::Name where Name is imported there; `None` for a
        name imported from another crate."""
        for k in range(len(target) - 1, -1, -1):
            mod, name = target[:k], target[k]
            if mod in modules and name in bound.get(mod, {}) and (mod, name) not in seen:
                if bound[mod][name] is None:
                    return None
                return resolve(bound[mod][name] + target[k + 1:], seen + ((mod, name),))
        return target

    results = []
    for parent in sorted(modules):
        kids = children_of(parent)
        if not kids:
            continue
        edges = {}
        n = len(parent)
        for src, rs in refs.items():
            if src[:n] != parent:
                continue
            if len(src) == n:
                from_node = PARENT
            else:
                from_node = src[n]
            for target, kind, here, _ in rs:
                if target is None or (from_node == PARENT and kind == "pub use"):
                    continue
                t = resolve(target)
                if t is None or t[:n] != parent:
                    continue
                if len(t) > n and t[n] in kids:
                    to = t[n]
                else:
                    to = PARENT
                if to != from_node:
                    edges.setdefault(from_node, set()).add(to)
        nodes = set(kids) | {PARENT}
        for comp in sccs(nodes, edges):
            if len(comp) > 1:
                file = crate.files[parent]
                if file.name in ("mod.rs", "lib.rs", "main.rs"):
                    folder = file.parent
                else:
                    folder = file.parent / file.stem
                results.append((str(folder.relative_to(workspace)), sorted(comp), edges))
    return results


def main():
    parser = argparse.ArgumentParser(
        description="Lists the import circles among sibling Rust modules."
    )
    parser.add_argument("workspace", nargs="?", type=Path,
                        default=Path(__file__).resolve().parent.parent,
                        help="the workspace to read (default: this script's)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also print the edges within each circle")
    args = parser.parse_args()
    workspace, verbose = args.workspace.resolve(), args.verbose
    found = False
    seen = set()
    for root in crate_roots(workspace):
        for folder, comp, edges in analyse(workspace, root):
            key = (folder, tuple(comp))
            if key in seen:
                continue
            seen.add(key)
            found = True
            print(f"{folder}: {', '.join(comp)}")
            if verbose:
                for a in comp:
                    for b in sorted(edges.get(a, ())):
                        if b in comp:
                            print(f"    {a} -> {b}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
