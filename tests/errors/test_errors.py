"""The package's one exception tree: every class in it, and its drawing, stay in step."""

from __future__ import annotations

import pickle

import pytest

from pyspark_kafka_txn import errors
from pyspark_kafka_txn.errors import (
    ConfigError,
    KafkaTxnError,
    RecordTooLargeError,
    StallTimeoutError,
)


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_in_the_tree_and_in_its_drawing(name: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, KafkaTxnError)
    drawing = errors.__doc__ or ""
    assert f"── {name} " in drawing or name == "KafkaTxnError", f"{name} is not drawn"


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (ConfigError, ValueError),
        (RecordTooLargeError, ValueError),
        (StallTimeoutError, TimeoutError),
    ],
)
def test_errors_that_are_also_builtin_errors(cls: type[Exception], builtin: type) -> None:
    error = cls("what happened")
    assert isinstance(error, builtin) and isinstance(error, KafkaTxnError)
    with pytest.raises(builtin, match=r"^what happened$"):
        raise error


def test_stall_timeout_error_keeps_its_class_and_message_when_pickled() -> None:
    error = StallTimeoutError("Cannot fetch records of t-0 beyond offset 5")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is StallTimeoutError
    assert str(copy) == str(error)
