"""The house's figures (issue 29): lines outside tests and of tests, imports running up the layers, package
circles and module import cycles crossing a package line. Structure, not speed: there is no baseline to measure.

    python bench/layers.py            # from a checkout's root (any commit: packages it lacks are skipped)

Imports are grimp's graph of the checkout's packages with type-only imports (under TYPE_CHECKING) left out. Each
package is ranked as in pyproject.toml's layers contract; an import counts as "up" when the imported package ranks
above the importer's, or beside it (siblings must not import each other). `X/__main__.py` -> cli/ (the `python -m`
shims onto cli/, by design) is counted apart.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import grimp

RANK = {"cli": 0, "webui": 0, "chat": 1, "bundle": 1, "control": 2, "storage": 3, "facts": 4, "retrieval": 5, "receipts": 6, "ledger": 7}


def lines(files: list[str]) -> int:
    return sum(len(Path(f).read_text(errors="replace").splitlines()) for f in files)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        out.append(group)
    return out


def main() -> None:
    py = subprocess.run(["git", "ls-files", "*.py"], capture_output=True, text=True, check=True).stdout.split()
    src = [p for p in py if not p.startswith("tests/")]
    tst = [p for p in py if p.startswith("tests/")]
    print(f"lines outside tests: {lines(src)} in {len(src)} .py files (of which bench/: {lines([f for f in src if f.startswith('bench/')])})")
    print(f"lines of tests: {lines(tst)} in {len(tst)} files")
    sys.path.insert(0, str(Path.cwd()))
    packages = [p for p in RANK if Path(p).is_dir()]
    graph = grimp.build_graph(*packages, include_external_packages=False, exclude_type_checking_imports=True)
    up: Counter[tuple[str, str]] = Counter()
    pairs: set[tuple[str, str]] = set()
    shims = 0
    for m in graph.modules:
        for d in graph.find_modules_directly_imported_by(m):
            a, b = m.split(".")[0], d.split(".")[0]
            if a == b:
                continue
            if m.endswith(".__main__") and b == "cli":
                shims += 1
                continue
            pairs.add((a, b))
            if RANK[a] >= RANK[b]:
                up[(a, b)] += 1
    print(f"python -m shims onto cli/ (counted apart): {shims} imports")
    print(f"imports running up the layers: {sum(up.values())} over {len(up)} package pairs")
    for (a, b), n in sorted(up.items()):
        print(f"   {a} -> {b}: {n}")
    circles = sorted({tuple(sorted(p)) for p in pairs if (p[1], p[0]) in pairs})
    print(f"package circles (two packages importing each other): {len(circles)} {circles}")
    groups = cycles(graph)
    crossing = [g for g in groups if len({m.split('.')[0] for m in g}) > 1]
    print(f"module import cycles: {len(groups)}, of which crossing a package line: {len(crossing)}")
    for g in crossing:
        print("   ", sorted(g)[:6], "..." if len(g) > 6 else "")


if __name__ == "__main__":
    main()
