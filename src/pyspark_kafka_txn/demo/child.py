"""The demo's Spark job as a child process: start it, read its events, drain or kill it."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from pyspark_kafka_txn.demo.protocol import EVENT

#: Environment of a Spark session that must not reach the job: under Spark Connect it
#: would turn the job's local session into a Connect client.
_SESSION_ENV = ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT", "PYSPARK_GATEWAY")


def local_spark_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child process that starts a local Spark of its own.

    Without the settings of a Spark session (under Spark Connect they would turn the
    child's local session into a Connect client), with ``PYSPARK_PYTHON`` set to this
    interpreter, and with ``extra`` on top.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SESSION_ENV)}
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra)
    return env


_ERROR = re.compile(r"\b\w*(Error|Exception)\b")


class JobFailedError(RuntimeError):
    """The job ended, failed or went silent before the demo expected it to."""


class JobProcess:
    """One run of a Spark job module (the JVM and Python workers below it).

    Parameters
    ----------
    settings
        The job's settings (its one argument, as JSON).
    log
        Where its stderr (and stdout lines that are not events) go.
    module
        The job's module, run as ``python -m MODULE SETTINGS_JSON``; it speaks the
        protocol of :mod:`pyspark_kafka_txn.demo.protocol`.
    """

    def __init__(
        self, settings: Any, log: Path, module: str = "pyspark_kafka_txn.demo.job"
    ) -> None:
        env = local_spark_env()
        self.log = log
        self._log_file = log.open("w")
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._proc = subprocess.Popen(  # noqa: S603 - this interpreter and our own module
            [sys.executable, "-m", module, settings.to_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=env,
            text=True,
            start_new_session=True,  # its own process group, killed as one
        )
        self._reader = threading.Thread(target=self._read, name="demo-job-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout: IO[str] | None = self._proc.stdout
        assert stdout is not None
        for line in stdout:
            if line.startswith(EVENT):
                self._events.put(json.loads(line))
            else:  # Spark's own output
                self._log_file.write(line)
        self._events.put({"event": "exited"})

    def next_event(self, timeout_s: float) -> dict[str, Any] | None:
        """The job's next event, or None after ``timeout_s`` without one."""
        try:
            return self._events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def tail(self, lines: int = 12) -> str:
        """The job's errors: the first lines naming an exception, and the log's path."""
        if not self._log_file.closed:
            self._log_file.flush()
        text = self.log.read_text(errors="replace").splitlines()
        errors = [line for line in text if _ERROR.search(line) and not line.startswith("\tat ")]
        shown = list(dict.fromkeys(errors))[:lines] or text[-lines:]
        return "\n".join([*shown, f"(the job's whole log: {self.log})"])

    def drain(self) -> None:
        """Ask the job to process what is available, stop its query and exit."""
        stdin = self._proc.stdin
        assert stdin is not None
        stdin.write("drain\n")
        stdin.flush()

    def wait(self, timeout_s: float) -> int:
        """Wait for the process to exit; its return code."""
        code = self._proc.wait(timeout_s)
        self._reader.join(10)
        for stream in (self._proc.stdin, self._proc.stdout, self._log_file):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):  # a broken pipe to a dead process
                    stream.close()
        return code

    def kill(self) -> None:
        """SIGKILL the job, its JVM and every Python worker at once, as a crash would."""
        victims = _descendants(self._proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        for pid in victims:  # Spark's Python daemon and workers may leave the group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.wait(60)

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self._proc.poll() is None

    def stop_quietly(self) -> None:
        """Kill the job if it is still running (cleanup after a failure)."""
        if self._proc.poll() is None:
            self.kill()
        else:
            self.wait(60)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
