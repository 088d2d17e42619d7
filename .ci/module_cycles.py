#!/usr/bin/env python3
"""Fails if the runtime's modules import each other in a cycle (issue 17's rule: imports point
downward only). Reads orb/src: a module is a top-level file or folder (`connection/` is one
module), an edge A -> B is any `crate::B` path in A's non-test code. Test code (files named
tests.rs or loom.rs, `#[cfg(test)]` / `#[cfg(all(test, ...))]` modules) is left out, as are
doc comments and comments.

    python3 .ci/module_cycles.py            # prints the graph's cycles, exit 1 if any
    python3 .ci/module_cycles.py --edges    # also prints every edge

A cheap stand-in for cargo-modules (no extra tool to build in CI).
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "orb", "src")
# Entry points and pure re-export hubs: everything may name them, they name everything.
IGNORED = {"lib", "guide"}


def module_of(path):
    rel = os.path.relpath(path, ROOT)
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def strip_tests_and_comments(text):
    """Source without comments and without `#[cfg(test)]`-gated modules (brace-matched)."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    gate = re.compile(r"#\[cfg\((?:test|all\(test[^\]]*)\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*")
    while True:
        m = gate.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        j = m.end()
        if j < len(text) and text[j] == ";":
            i = j + 1
            continue
        if j >= len(text) or text[j] != "{":
            i = j
            continue
        depth = 0
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    return "".join(out)


def graph():
    modules = set()
    for name in os.listdir(ROOT):
        if name.endswith(".rs") or os.path.isdir(os.path.join(ROOT, name)):
            modules.add(name[:-3] if name.endswith(".rs") else name)
    edges = {m: set() for m in modules}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".rs") or f in ("tests.rs", "loom.rs"):
                continue
            path = os.path.join(dirpath, f)
            src = module_of(path)
            if src in IGNORED:
                continue
            code = strip_tests_and_comments(open(path, encoding="utf-8").read())
            for target in re.findall(r"\bcrate::(\w+)", code):
                if target in modules and target != src and target not in IGNORED:
                    edges[src].add(target)
            # `use crate::{a, b::c}` groups
            for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
                for target in re.findall(r"(?:^|,)\s*(\w+)", group):
                    if target in modules and target != src and target not in IGNORED:
                        edges[src].add(target)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    edges = graph()
    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
    found = cycles(edges)
    for c in found:
        ties = [f"{a} -> {b}" for a in c for b in sorted(edges[a]) if b in c]
        print("import cycle: " + ", ".join(c) + "  (" + "; ".join(ties) + ")")
    print(f"{len(edges)} modules, {sum(len(v) for v in edges.values())} edges, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
