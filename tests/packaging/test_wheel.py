"""The package as a user gets it: ``python -m build``, ``twine check``, and the wheel
installed into a fresh virtual environment writing and reading exactly once.

The build runs on a copy of the build's inputs (pyproject.toml, setup.cfg, README.md,
LICENSE, src/), so the working tree gets no build/ or egg-info. ``python -m build`` makes
the sdist, then the wheel from the unpacked sdist, so a file missing from the sdist fails
here too. The fresh environment gets the PySpark of the running tests first (as a cluster
has its own), then the wheel, from pip's cache when it has them; installing the wheel must
leave that PySpark alone.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

import pyspark_kafka_txn
from tests.support.wheel import ROOT, copy_build_inputs, run

#: What ``python -m build`` reads from the repository.
SMOKE = Path(__file__).with_name("wheel_smoke.py")
README = ROOT / "README.md"

pytestmark = [pytest.mark.slow, pytest.mark.own_spark]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    source = tmp_path_factory.mktemp("source")
    copy_build_inputs(source)
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, source)
    yield out


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("*.whl")
    return wheel


def test_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert sorted(f.name.rsplit(".", 1)[-1] for f in files) == ["gz", "whl"], files
    out = run(sys.executable, "-m", "twine", "check", "--strict", *files)
    assert out.count("PASSED") == 2, out


def test_wheel_metadata_never_requires_pyspark(dist: Path) -> None:
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(name).decode())
        names = set(wheel.namelist())
    assert metadata["Version"] == pyspark_kafka_txn.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "pyspark_kafka_txn/py.typed" in names
    requires = metadata.get_all("Requires-Dist") or []
    pyspark = [r for r in requires if r.split(";")[0].strip().startswith("pyspark")]
    # Only under extras (spark, dev): a plain install never pulls (or replaces) PySpark.
    assert pyspark, requires
    assert all("extra ==" in r for r in pyspark), pyspark


def test_the_description_has_no_link_that_breaks_on_a_package_index(dist: Path) -> None:
    """PyPI resolves a relative link against its own pages: README.md's links into the
    source tree must reach the description as plain paths, each a file of the sdist."""
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(wheel.read(name).decode())
    body = metadata.get_payload()
    assert isinstance(body, str) and "kafka_txn" in body  # the README, not an empty text
    targets = re.findall(r"\]\(([^)\s]+)\)", body)
    relative = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]
    assert relative == [], relative
    assert "Project-URL" not in metadata  # no public home yet: no address that would 404
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        files = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    named = set(re.findall(r"`((?:docs|bench|tests)/[\w./-]+\.md)`", body))
    readme_links = set(re.findall(r"\]\(((?:docs|bench|tests)/[^)]+\.md)\)", README.read_text()))
    assert readme_links and readme_links <= named, readme_links - named
    assert named <= files, named - files


@pytest.mark.timeout(900)
def test_installed_wheel_writes_and_reads_exactly_once(dist: Path, tmp_path: Path) -> None:
    phases: dict[str, float] = {}
    start = time.monotonic()
    env_dir = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", env_dir)
    python = env_dir / "bin" / "python"
    # This environment's pip installs into the new one (--python): no ensurepip.
    pip = (sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check")
    spark_version = version("pyspark")
    run(*pip, "install", "--quiet", f"pyspark=={spark_version}")
    phases["venv + pyspark"] = time.monotonic() - start

    mark = time.monotonic()
    run(*pip, "install", "--quiet", wheel_of(dist))
    phases["wheel + dependencies"] = time.monotonic() - mark
    shown = run(*pip, "list", "--format=json")
    installed = {p["name"].lower(): p["version"] for p in json.loads(shown)}
    assert installed["pyspark"] == spark_version, "installing the wheel replaced PySpark"
    assert installed["pyspark-kafka-txn"] == pyspark_kafka_txn.__version__

    cli = run(env_dir / "bin" / "kafka-txn", "--version")
    assert cli.strip() == f"kafka-txn {pyspark_kafka_txn.__version__}"

    mark = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK_"))}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = str(python)
    out = run(python, SMOKE, cwd=tmp_path, env=env, timeout=300)
    phases["smoke script"] = time.monotonic() - mark
    result = json.loads(out.strip().splitlines()[-1])
    assert result["spark_read_exactly_once"], result
    assert result["read_committed_exactly_once"], result
    assert Path(result["module"]).is_relative_to(env_dir.resolve())
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
    sys.stderr.write(f"wheel smoke test: {timings}\n")
