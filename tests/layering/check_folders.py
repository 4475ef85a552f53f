"""Folder arrows run one way: reads every #include "..." in kolo's C++ sources, resolves each to
the folder it points at, and fails if the folder graph has a cycle (two folders that include
each other, or a longer loop), printing the include lines that make it. It looks twice: at the
top-level folders (src/ includes transports/, so nothing in transports/ may include src/), and
at the finer nodes below.

The nodes are the top-level folders of the library and its programs (include/, common/,
kernels/, transports/, src/, tools/), except that a folder holding one part per subfolder counts
each subfolder as its own node: src/engine, src/algorithms, ...; transports/tcp, transports/shm,
... beside transports (the files at its top: the interface and the registry); kernels/cpu,
kernels/cuda; tools/kolorun, tools/kolo-store. tests/, bench/, examples/ and python/ are leaves:
they may include anything, and what they include is not scanned (nothing may include them, and
an include into them from a scanned folder is reported).

usage: check_folders.py SOURCE_ROOT [--graph]
  --graph  print the folder graph (each folder and the folders it includes) and exit 0 unless
           there is a cycle
Prints GoogleTest-style lines for scripts/test.sh.
"""
import os
import re
import subprocess
import sys

SCANNED = ["include", "common", "kernels", "transports", "src", "tools"]
LEAVES = ["tests", "bench", "examples", "python"]
# Folders whose subfolders are nodes of their own; their top-level files form the folder's node.
SPLIT = {"src", "tools", "transports", "kernels"}
# Where "x/y.hpp" is looked up, after the including file's own folder (meson.build: kolo_inc,
# the layer views, tools/meson.build).
INCLUDE_ROOTS = ["include", "src", "tools", "."]
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def source_files(root):
    """Tracked C++ files (git ls-files), else every file under the scanned folders."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for top in SCANNED:
            for d, _, names in os.walk(os.path.join(root, top)):
                files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in files if f.endswith(EXTENSIONS) and f.split("/")[0] in SCANNED
                  and not os.path.islink(os.path.join(root, f)))


def node_of(rel):
    """The folder node a repository path belongs to, or None outside the scanned and leaf folders."""
    parts = rel.split("/")
    if parts[0] not in SCANNED + LEAVES:
        return None
    if parts[0] in SPLIT and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def resolve(root, including, spelling):
    """The repository path an include names: the including file's folder first, then the roots.
    A header that exists only in the build (a generated one) resolves to the folder its spelling
    names, if that folder exists."""
    candidates = [os.path.join(os.path.dirname(including), spelling)] + \
                 [os.path.normpath(os.path.join(r, spelling)) for r in INCLUDE_ROOTS]
    for c in candidates:
        full = os.path.join(root, c)
        if os.path.isfile(full):
            return os.path.relpath(os.path.realpath(full), os.path.realpath(root))
    for r in INCLUDE_ROOTS:
        d = os.path.normpath(os.path.join(r, os.path.dirname(spelling)))
        if d != "." and os.path.isdir(os.path.join(root, d)):
            return os.path.relpath(os.path.realpath(os.path.join(root, d, os.path.basename(spelling))),
                                   os.path.realpath(root))
    return None


def folder_graph(root):
    """{from: {to: [include lines]}} and the includes that resolved to nothing."""
    edges, unresolved, nodes = {}, [], set()
    for rel in source_files(root):
        src = node_of(rel)
        nodes.add(src)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, rel, m.group(1))
                if target is None:
                    unresolved.append("%s:%d: %s" % (rel, n, line.strip()))
                    continue
                dst = node_of(target)
                if dst is None or dst == src:
                    continue
                edges.setdefault(src, {}).setdefault(dst, []).append("%s:%d: %s" % (rel, n, line.strip()))
    for s in list(edges):
        nodes.update(edges[s])
    return nodes, edges, unresolved


def top_level(nodes, edges):
    """The same graph with every node collapsed to its top-level folder."""
    top = lambda v: v.split("/")[0]
    t_edges = {}
    for s in edges:
        for d, lines in edges[s].items():
            if top(s) != top(d):
                t_edges.setdefault(top(s), {}).setdefault(top(d), []).extend(lines)
    return {top(v) for v in nodes}, t_edges


def cycles(nodes, edges):
    """The strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
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

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def print_graph(nodes, edges):
    # Lowest first: a folder is printed after every folder it includes (when there is no cycle).
    order, seen = [], set()

    def place(v, path):
        if v in seen or v in path:
            return
        for w in sorted(edges.get(v, {})):
            place(w, path | {v})
        seen.add(v)
        order.append(v)

    for v in sorted(nodes):
        place(v, frozenset())
    width = max(len(v) for v in order) if order else 0
    for v in order:
        targets = sorted(edges.get(v, {}))
        print("  %-*s -> %s" % (width, v, ", ".join(targets) if targets else "(nothing)"))


def check(root, show_graph=True):
    """Runs the check; returns (passed, failed names). Prints the graph and any cycle."""
    nodes, edges, unresolved = folder_graph(root)
    failed = []
    t_nodes, t_edges = top_level(nodes, edges)
    if show_graph:
        print("Top-level folders (each -> the folders it includes):")
        print_graph(t_nodes, t_edges)
        print("Folder graph (each folder -> the folders it includes):")
        print_graph(nodes, edges)
    for name, (ns, es) in [("Layering.TopLevelArrowsRunOneWay", (t_nodes, t_edges)),
                           ("Layering.FolderArrowsRunOneWay", (nodes, edges))]:
        found = cycles(ns, es)
        for comp in found:
            print("[  FAILED  ] %s: these folders include each other: %s" % (name, ", ".join(comp)))
            members = set(comp)
            for s in comp:
                for d in sorted(es.get(s, {})):
                    if d in members:
                        print("  %s -> %s:" % (s, d))
                        for line in es[s][d]:
                            print("    " + line)
        if found:
            failed.append(name)
        else:
            print("[       OK ] %s" % name)
    name = "Layering.NothingIncludesTestsOrBench"
    leaf_includes = [(s, d) for s in edges for d in edges[s] if d in LEAVES]
    for s, d in leaf_includes:
        print("[  FAILED  ] %s: %s includes %s/:" % (name, s, d))
        for line in edges[s][d]:
            print("    " + line)
    if leaf_includes:
        failed.append(name)
    else:
        print("[       OK ] %s" % name)
    name = "Layering.EveryIncludeResolves"
    if unresolved:
        print("[  FAILED  ] %s: includes that name no file:" % name)
        for line in unresolved:
            print("    " + line)
        failed.append(name)
    else:
        print("[       OK ] %s" % name)
    return 4 - len(failed), failed


def main():
    args = [a for a in sys.argv[1:] if a != "--graph"]
    if len(args) != 1:
        print(__doc__)
        return 2
    passed, failed = check(os.path.abspath(args[0]))
    print("[  PASSED  ] %d tests." % passed)
    if failed:
        print("[  FAILED  ] %d tests, listed below:" % len(failed))
        for n in failed:
            print("[  FAILED  ] %s" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
