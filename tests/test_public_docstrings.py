"""Every public API object of the user-facing packages has a docstring (``make lint`` runs this).

The packages are ``sparkpoint.datastream``, ``sparkpoint.common`` and ``sparkpoint.state_processor``:
what a job imports, and what a user's IDE and ``help()`` show. Public means:

* a module whose path has no part with a leading underscore (a package's ``__init__.py`` is the
  package's module, and public);
* in a public module, a class or function defined at module level whose name has no leading
  underscore;
* in a public class, a class or method defined in its body whose name has no leading underscore,
  properties included (a property's setter and deleter share the getter's docstring, and
  ``typing.overload`` stubs the implementation's). Names with a leading underscore, dunder methods
  among them, are not public; ``__init__`` is documented by its class's docstring, which is
  required.

The check is on source text (``ast``), so it needs no import and names each miss as
``path:line name``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sparkpoint/datastream", "sparkpoint/common", "sparkpoint/state_processor")
_NOT_DOCUMENTED_ON_THEIR_OWN = ("setter", "deleter")


def _public_modules(root: Path) -> list[Path]:
    modules = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).parts
            if not any(p.startswith("_") and p != "__init__.py" for p in parts):
                modules.append(path)
    return modules


def _shares_a_docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        name = ast.unparse(decorator)
        if name.rsplit(".", 1)[-1] in _NOT_DOCUMENTED_ON_THEIR_OWN or name in ("overload", "typing.overload"):
            return True
    return False


def _undocumented_in(body: list[ast.stmt], where: str, prefix: str) -> list[str]:
    missing = []
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if node.name.startswith("_"):
            continue
        if not isinstance(node, ast.ClassDef) and _shares_a_docstring(node):
            continue
        if ast.get_docstring(node) is None:
            missing.append(f"{where}:{node.lineno} {prefix}{node.name}")
        if isinstance(node, ast.ClassDef):
            missing.extend(_undocumented_in(node.body, where, f"{prefix}{node.name}."))
    return missing


def undocumented(root: Path = ROOT) -> list[str]:
    """Every public module, class, function, method and property without a docstring, as ``path:line name``."""
    missing = []
    for path in _public_modules(root):
        where = str(path.relative_to(root))
        tree = ast.parse(path.read_text(), filename=where)
        if ast.get_docstring(tree) is None:
            missing.append(f"{where}:1 (module)")
        missing.extend(_undocumented_in(tree.body, where, ""))
    return missing


def test_every_public_api_object_has_a_docstring():
    assert len(_public_modules(ROOT)) > 40
    missing = undocumented()
    assert not missing, "public API without a docstring:\n" + "\n".join(missing)


def test_a_removed_docstring_is_named(tmp_path):
    """The check can fail: a copy of the tree with one method's docstring taken out is caught."""
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
    module = tmp_path / "sparkpoint/datastream/data_stream.py"
    tree = ast.parse(module.read_text())
    stream = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DataStream")
    method = next(n for n in stream.body if isinstance(n, ast.FunctionDef) and n.name == "map")
    docstring = method.body[0]
    lines = module.read_text().splitlines(keepends=True)
    lines[docstring.lineno - 1 : docstring.end_lineno] = [" " * docstring.col_offset + "pass\n"]
    module.write_text("".join(lines))

    assert undocumented(tmp_path) == [f"sparkpoint/datastream/data_stream.py:{method.lineno} DataStream.map"]


def test_setters_private_names_and_dunders_are_not_public(tmp_path):
    module = tmp_path / "sparkpoint/common/example.py"
    module.parent.mkdir(parents=True)
    (tmp_path / "sparkpoint/common/_private.py").write_text("def f(): pass\n")
    module.write_text(
        '"""A module."""\n'
        "class A:\n"
        '    """A class."""\n'
        "    def __init__(self): pass\n"
        "    def __eq__(self, other): return True\n"
        "    def _helper(self): pass\n"
        "    @property\n"
        '    def size(self):\n        """The size."""\n        return 1\n'
        "    @size.setter\n"
        "    def size(self, value): pass\n"
        "    def run(self): pass\n"
        "    class Builder:\n"
        "        def build(self): pass\n"
        "def _internal(): pass\n"
        "def public(): pass\n"
    )
    assert undocumented(tmp_path) == [
        "sparkpoint/common/example.py:13 A.run",
        "sparkpoint/common/example.py:14 A.Builder",
        "sparkpoint/common/example.py:15 A.Builder.build",
        "sparkpoint/common/example.py:17 public",
    ]
