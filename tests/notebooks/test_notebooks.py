"""The notebooks in ``notebooks/`` run, in both forms, and show what they claim.

Each notebook exists as a Databricks source notebook (``.py``, the source of truth) and as
a Jupyter notebook generated from it by ``notebooks/build.py``. The ``.py`` runs as a plain
script (``dbutils``, ``display`` and ``spark`` absent); the ``.ipynb`` runs in a Jupyter
kernel through nbclient. Either form starts its own embedded cluster and local
SparkSession, so these tests run once, not again per ``KAFKA_TXN_SPARK`` mode.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from pyspark_kafka_txn.demo.child import local_spark_env

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: A notebook's whole run: longer than its hang detectors (600 s for a script, 300 s for
#: a cell), so that a hang fails with their message, not pytest's.
NOTEBOOK_TIMEOUT_S = 900

#: What each notebook prints once it has checked its own outcome (its last cells assert
#: the same numbers, so a notebook that printed something else would fail first).
SUMMARY = {
    "quickstart": re.compile(
        r"^quickstart: read_committed=5 read_uncommitted=8 streamed=5$", re.MULTILINE
    ),
    "exactly_once_pipeline": re.compile(
        r"^pipeline: committed_in=80 aborted_in=20 out=80 missing=0 duplicates=0 "
        r"aborted_out=0 wrong_totals=0 batches=(\d+)$",
        re.MULTILINE,
    ),
}


def _notebook_env() -> dict[str, str]:
    env = local_spark_env()
    # Speed only: the driver JVM compiles with C1 alone. On 2 shared cores it halves the
    # CPU a short Spark run costs (mostly JIT compilation); the notebooks are unchanged.
    env["PYSPARK_SUBMIT_ARGS"] = (
        "--driver-java-options '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell"
    )
    return env


def _check_summary(name: str, output: str) -> None:
    found = SUMMARY[name].search(output)
    assert found is not None, f"{name} did not print its summary:\n{output[-5000:]}"
    if name == "exactly_once_pipeline":
        assert int(found.group(1)) >= 2, "maxOffsetsPerTrigger should split the input"
        assert "addBatch_ms" in output  # the progress table


def _build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ipynb_files_are_generated_from_the_databricks_sources() -> None:
    build = _build()
    assert set(build.SOURCES) == {f"{name}.py" for name in SUMMARY}
    for name in SUMMARY:
        source = NOTEBOOKS / f"{name}.py"
        committed = (NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8")
        assert build.cells_of(committed) == build.cells_of(build.render(source)), (
            f"notebooks/{name}.ipynb is out of date: run python notebooks/build.py --execute"
        )
        nb = nbformat.reads(committed, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        # Kept from a real run, for readers: every cell ran, and the summary is there.
        assert all(c.execution_count is not None for c in code), f"{name}: not run"
        printed = "".join(o.get("text", "") for c in code for o in c.outputs)
        _check_summary(name, printed)
        # Same cells in both forms; the Jupyter form has no widgets.
        assert len(nb.cells) == len(build.split_cells(source.read_text(encoding="utf-8")))
        assert not any("dbutils.widgets" in c.source for c in nb.cells)


def test_databricks_sources_have_the_databricks_shape() -> None:
    for name in SUMMARY:
        text = (NOTEBOOKS / f"{name}.py").read_text(encoding="utf-8")
        assert text.startswith("# Databricks notebook source\n")
        assert "\n# COMMAND ----------\n" in text
        assert "\n# MAGIC %md\n" in text
        assert "\n# MAGIC %pip install /Volumes/" in text  # the wheel, as docs/install.md says
        assert "dbutils.library.restartPython()" in text and "register(spark)" in text
        assert "dbutils.widgets.text(" in text and "dbutils.secrets.get(" in text
        assert "trigger(availableNow=True)" in text
        assert "processingTime" not in text  # serverless compute accepts availableNow only


@pytest.mark.own_spark
@pytest.mark.slow
@pytest.mark.compat
@pytest.mark.parametrize("name", sorted(SUMMARY))
@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S)
def test_databricks_source_runs_as_a_script(name: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(NOTEBOOKS / f"{name}.py")],
        cwd=tmp_path,
        env=_notebook_env(),
        capture_output=True,
        text=True,
        timeout=600,  # a hang detector
        check=False,
    )
    assert proc.returncode == 0, f"{name}.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    _check_summary(name, proc.stdout)


@pytest.mark.own_spark
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUMMARY))
@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S)
def test_ipynb_runs_in_a_jupyter_kernel(name: str, tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    # A kernelspec of its own, so the kernel is this interpreter whatever else is installed.
    spec = tmp_path / "kernels" / "kafka-txn-tests"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "kafka-txn tests", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    manager = AsyncKernelManager(
        kernel_name=spec.name,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]),
    )
    client = NotebookClient(
        nb,
        km=manager,
        timeout=300,  # per cell; a hang detector
        resources={"metadata": {"path": str(tmp_path)}},
    )
    # The client does not own a kernel manager it was given: cleanup_kc=True makes it shut
    # the kernel down and close its channels anyway (else their sockets are left unclosed).
    client.execute(env=_notebook_env(), cleanup_kc=True)
    output = "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "stream" and out.name == "stdout"
    )
    _check_summary(name, output)


class _RemoteSpark:
    """What the notebooks ask of a session on a multi-node cluster: its master is remote.

    A stand-in for Spark only (Kafka is never reached): the guard must stop the notebook
    before anything starts.
    """

    class _Conf:
        def get(self, key: str) -> str:
            assert key == "spark.master"
            return "spark://10.0.0.1:7077"

    class _DataSources:
        def register(self, source: type) -> None:
            assert source.__name__ == "KafkaTxnDataSource"

    conf = _Conf()
    dataSource = _DataSources()  # noqa: N815 - SparkSession's attribute name


@pytest.mark.parametrize("name", sorted(SUMMARY))
def test_without_bootstrap_servers_on_a_cluster_the_notebook_stops_at_once(name: str) -> None:
    """No bootstrap servers and a non-local master: the embedded cluster would live on the
    driver, out of the executors' reach; the notebook says so instead of starting it."""
    import runpy
    import threading

    before = {t.name for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="this Spark is not local") as stopped:
        runpy.run_path(str(NOTEBOOKS / f"{name}.py"), init_globals={"spark": _RemoteSpark()})
    assert "Set bootstrap_servers to your Kafka" in str(stopped.value)
    started = {t.name for t in threading.enumerate()} - before
    assert not [t for t in started if "kafka" in t.lower()], started  # no broker started
