"""The wire constants are defined once for the package, in ``wire.py``, and agree with kio."""

from __future__ import annotations

import ast
from pathlib import Path

from kio.schema.index import api_key_map

from pyspark_kafka_txn import wire
from pyspark_kafka_txn.embedded.handlers import APIS

PACKAGE = Path(wire.__file__).resolve().parent
# The API keys: every upper-case int of wire.py named after a kio schema.
API_KEYS = {
    name: value
    for name, value in vars(wire).items()
    if name.isupper() and isinstance(value, int) and api_key_map.get(value) == name.lower()
}
CONSTANTS = {
    name
    for name, value in vars(wire).items()
    if name.isupper() and isinstance(value, int | frozenset)
}


def test_every_served_api_has_its_key_in_wire_named_as_kio_names_it() -> None:
    assert set(APIS) <= set(API_KEYS.values())
    for key, spec in APIS.items():
        name = api_key_map[key]
        assert getattr(wire, name.upper()) == key, spec.name


def test_api_keys_agree_with_kio() -> None:
    # Every constant in the API-key section is named after kio's schema of that key.
    source = Path(wire.__file__).read_text()
    section = source[source.index("# --- API keys") : source.index("#: The APIs a connection")]
    names = [line.split(":")[0] for line in section.splitlines() if ": Final = " in line]
    assert len(names) >= 39
    for name in names:
        assert api_key_map[getattr(wire, name)] == name.lower(), name


def test_no_other_module_of_the_package_defines_a_wire_constant() -> None:
    redefined = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "wire.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                elts = target.elts if isinstance(target, ast.Tuple) else [target]
                redefined += [
                    f"{path.relative_to(PACKAGE)}: {e.id}"
                    for e in elts
                    if isinstance(e, ast.Name) and e.id in CONSTANTS
                ]
    assert redefined == []


def test_pre_authentication_apis() -> None:
    assert {api_key_map[k] for k in wire.PRE_AUTH_APIS} == {
        "api_versions",
        "sasl_handshake",
        "sasl_authenticate",
    }
