"""The package's "one of each" rules, checked on its source (docs/design.md, "Conventions").

* A sub-package's ``__init__.py`` is a facade: a docstring, ``__all__`` and lazy
  re-exports (:func:`pyspark_kafka_txn._lazy.lazy_exports`), no code of its own. The root
  package is the one exception: Spark looks up ``DefaultSource`` there.
* A module's logger is ``logger = logging.getLogger(__name__)``.
* Exceptions are imported from ``pyspark_kafka_txn.errors``; only the protocol client
  (which must not import the rest of the package) and ``errors.py`` itself use
  ``pyspark_kafka_txn.client.errors``.
* One topic-partition type, :class:`pyspark_kafka_txn.wire.TopicPartition`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "pyspark_kafka_txn"
MODULES = sorted(SRC.rglob("*.py"))
FACADES = [p for p in MODULES if p.name == "__init__.py" and p.parent != SRC]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _facade_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return isinstance(node.value.value, str)  # the docstring
    if isinstance(node, ast.ImportFrom):
        return node.module in {"__future__", "typing", "pyspark_kafka_txn._lazy"}
    if isinstance(node, ast.If):  # if TYPE_CHECKING: imports for the type checker
        return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return names in ({"__all__"}, {"__getattr__", "__dir__"})
    return False


def test_the_rules_see_every_facade() -> None:
    assert {p.parent.name for p in FACADES} >= {"client", "reader", "writer", "options", "demo"}


@pytest.mark.parametrize("path", FACADES, ids=lambda p: str(p.relative_to(SRC)))
def test_sub_packages_are_facades(path: Path) -> None:
    extra = [
        f"line {node.lineno}: {ast.unparse(node).splitlines()[0]}"
        for node in _tree(path).body
        if not _facade_statement(node)
    ]
    assert not extra, f"{path.relative_to(SRC)} holds code of its own: {extra}"


def test_loggers_are_named_logger_after_the_module() -> None:
    wrong = []
    for path in MODULES:
        for node in _tree(path).body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            if ast.unparse(node.value.func) != "logging.getLogger":
                continue
            if ast.unparse(node) != "logger = logging.getLogger(__name__)":
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node)}")
    assert not wrong


def test_exceptions_come_from_the_errors_module() -> None:
    allowed = {SRC / "errors.py"} | set((SRC / "client").rglob("*.py"))
    wrong = []
    for path in MODULES:
        if path in allowed:
            continue
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "pyspark_kafka_txn.client.errors"
            ):
                errors = [a.name for a in node.names if a.name.endswith("Error")]
                if errors:
                    wrong.append(f"{path.relative_to(SRC)}:{node.lineno}: {errors}")
    assert not wrong


def test_one_topic_partition_type() -> None:
    defined = []
    for path in MODULES:
        for node in _tree(path).body:
            if isinstance(node, ast.ClassDef) and node.name == "TopicPartition":
                defined.append(path.relative_to(SRC))
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                text = ast.unparse(node)
                if text.startswith("TopicPartition"):
                    defined.append(path.relative_to(SRC))
    assert defined == [Path("wire.py")]
