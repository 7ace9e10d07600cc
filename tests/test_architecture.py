"""The layout's two rules (docs/design.md section 1), checked on the source: data flows kg -> rules, kg -> probe -> unlearn ->
bench, so no module imports a layer to its right; and no modules import each other in a circle,
counting the imports inside functions (a lazy import hides a circle from Python, not from the
reader)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "deepunlearn"
ORDER = ["kg", "rules", "probe", "unlearn", "bench"]
#: what each layer may import besides itself (kg -> rules and kg -> probe are separate branches)
ALLOWED = {"kg": set(), "rules": {"kg"}, "probe": {"kg"}, "unlearn": {"kg", "rules", "probe"},
           "bench": {"kg", "rules", "probe", "unlearn"}}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> nx.DiGraph:
    g = nx.DiGraph()
    for path in PACKAGE.rglob("*.py"):
        mod = _module(path)
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        g.add_node(mod, file=path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.startswith("deepunlearn"):
                    target = node.module
                else:
                    continue
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                for t in names:
                    g.add_edge(mod, t)
    return g


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def test_no_layer_imports_one_to_its_right():
    bad = [(a, b) for a, b in _imports().edges
           if _layer(a) and _layer(b) and _layer(b) != _layer(a) and _layer(b) not in ALLOWED[_layer(a)]]
    assert not bad, bad


def test_no_import_circle_between_modules():
    g = _imports()
    modules = {m for m in g if (PACKAGE.parent / (m.replace(".", "/") + ".py")).exists()}
    # package __init__ files re-export their modules; a module importing its own package's
    # __init__ is not a circle between modules
    circles = [c for c in nx.simple_cycles(g.subgraph(modules))]
    assert not circles, circles


def test_the_report_is_one_package_of_sections():
    """The report of a sweep is ``bench/report/``: a module a section (with its tables and figures)
    and the helpers they share. No report, section or figure module lies flat in ``bench/``, and no
    module of ``bench/`` outside the package draws (imports matplotlib)."""
    bench = PACKAGE / "bench"
    flat = sorted(p.name for p in bench.glob("*.py")
                  if p.stem in ("report", "plots", "tables") or p.stem.endswith(("_report", "_plots", "_section")))
    assert not flat, flat
    assert not (bench / "report.py").exists() and (bench / "report" / "__init__.py").exists()
    modules = {p.stem for p in (bench / "report").glob("*.py")}
    assert {"headline", "deep", "forms", "measures", "setup_section", "tables", "plots"} <= modules, modules
    drawing = []
    for path in bench.rglob("*.py"):
        if path.parent == bench / "report":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            drawing += [path.name for n in names if n.split(".")[0] == "matplotlib"]
    assert not drawing, drawing
