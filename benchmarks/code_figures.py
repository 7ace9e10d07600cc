"""Figures of the package's code, for reviews of its structure: functions over 80 lines,
functions with over 10 parameters, private names imported across modules and files over 400
lines, each listed.

    python benchmarks/code_figures.py            # the figures
    python benchmarks/code_figures.py --list     # and the places behind them
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "deepunlearn"


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _params(fn: ast.FunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len([n for n in names if n not in ("self", "cls")])


def figures(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Each figure's places (``file:line name``), by figure."""
    out: dict[str, list[str]] = {"functions over 80 lines": [], "functions with over 10 parameters": [],
                                 "private names imported across modules": [], "files over 400 lines": []}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 400:
            out["files over 400 lines"].append(f"{rel} ({len(text.splitlines())})")
        tree = ast.parse(text)
        for fn in _functions(tree):
            length = fn.end_lineno - fn.lineno + 1
            if length > 80:
                out["functions over 80 lines"].append(f"{rel}:{fn.lineno} {fn.name} ({length})")
            if _params(fn) > 10:
                out["functions with over 10 parameters"].append(f"{rel}:{fn.lineno} {fn.name} ({_params(fn)})")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None or isinstance(node, ast.ImportFrom) \
                    and node.level:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        out["private names imported across modules"].append(
                            f"{rel}:{node.lineno} {'.' * node.level}{node.module or ''}.{alias.name}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="list the places behind each figure")
    args = ap.parse_args()
    for name, places in figures().items():
        print(f"{name}: {len(places)}")
        if args.list:
            for p in places:
                print(f"    {p}")


if __name__ == "__main__":
    main()
