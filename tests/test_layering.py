"""The import graph of the package: no circle between cudaperf modules, and no import against
the package flow of DESIGN.md ("must not import" column). Every import counts, also one under
`if TYPE_CHECKING:` or inside a function: a circle hidden by a lazy import is still a circle
in the design. Parsed with `ast`, nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# The package flow (DESIGN.md's package table, README "Layering"): a package imports only
# packages earlier in FLOW; `report` may import all of them but `train`; `cli` (and
# `__main__`) anything. Top-level modules (`fields`, `jsonl`, `procpool`, `toolchain`, `models`,
# `generation`)
# sit under `tasks`.
FLOW = [
    "fields",
    "jsonl",
    "procpool",
    "toolchain",
    "models",
    "generation",
    "tasks",
    "datagen",
    "execute",
    "analyze",
    "rank",
    "reward",
    "refine",
    "train",
]
# Imports against the flow that issue 18 has not removed yet, each with its reason. The test
# fails when one of them is gone too, so the list only ever shrinks.
KNOWN_AGAINST_FLOW: dict[tuple[str, str], str] = {}


# Candidate code packaged as data (implementations of sample tasks) may import the native
# loader and nothing else of cudaperf: the one documented exception to the flow (README).
CANDIDATE_CODE = "cudaperf.tasks.sample"
CANDIDATE_IMPORTS = {"cudaperf.execute.native"}


def module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The cudaperf modules `path` (module `name`) imports: `from a import b` is an import of
    the module `a.b` when there is one, else of `a`; relative imports resolved."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                found.add(sub if (sub := f"{base}.{a.name}") in modules else base)
    out = set()
    for m in found:
        while m not in modules and "." in m:  # `import pkg.mod.func`-style leftovers
            m = m.rsplit(".", 1)[0]
        if m in modules and m not in (name, "cudaperf"):
            out.add(m)
    return out


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """module -> the cudaperf modules it imports."""
    files = {module_name(p, root): p for p in (root / "cudaperf").rglob("*.py")}
    return {name: imports_of(path, name, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def allowed(pa: str, pb: str) -> bool:
    """Whether package `pa` may import package `pb` under the flow."""
    if pa == pb or pa in ("cli", "__main__"):
        return True
    if pa == "report":
        return pb in FLOW and pb != "train"
    if pa in FLOW and pb in FLOW:
        return FLOW.index(pb) < FLOW.index(pa)
    raise AssertionError(f"package {pa or pb!r} is not placed in the flow: add it to FLOW")


def against_flow(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(package, package it must not import) -> the 'a -> b' module imports that do."""
    bad: dict[tuple[str, str], list[str]] = {}
    for a, deps in graph.items():
        if a.startswith(CANDIDATE_CODE + ".") and deps <= CANDIDATE_IMPORTS:
            continue
        for b in deps:
            pa, pb = package_of(a), package_of(b)
            if not allowed(pa, pb):
                bad.setdefault((pa, pb), []).append(f"{a} -> {b}")
    return bad


def test_no_circle_between_cudaperf_modules():
    found = cycles(import_graph())
    assert not found, "import circles (move the shared piece one layer down):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_no_import_against_the_package_flow():
    bad = against_flow(import_graph())
    new = {k: v for k, v in bad.items() if k not in KNOWN_AGAINST_FLOW}
    assert not new, "imports against DESIGN.md's package flow:\n" + "\n".join(
        f"{a} must not import {b}: {', '.join(sorted(v))}" for (a, b), v in sorted(new.items())
    )
    gone = sorted(set(KNOWN_AGAINST_FLOW) - set(bad))
    assert not gone, f"fixed, now drop them from KNOWN_AGAINST_FLOW: {gone}"


def test_the_checks_see_a_circle_a_lazy_import_and_a_wrong_way_import(tmp_path):
    pkg = tmp_path / "cudaperf"
    for d in ("tasks", "execute"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "execute" / "a.py").write_text("from cudaperf.execute.b import f\n")
    (pkg / "execute" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import g\n"
    )
    (pkg / "tasks" / "m.py").write_text("def f():\n    from cudaperf.execute import a\n")
    (pkg / "tasks" / "sample").mkdir()
    (pkg / "tasks" / "sample" / "c.py").write_text("from cudaperf.execute.b import load_cuda\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["cudaperf.execute.a", "cudaperf.execute.b"]]
    found = against_flow(graph)
    assert list(found) == [("tasks", "execute")]  # the lazy import counts too
    assert sorted(found["tasks", "execute"]) == [
        "cudaperf.tasks.m -> cudaperf.execute.a",
        "cudaperf.tasks.sample.c -> cudaperf.execute.b",  # candidate code: load_cuda only
    ]
