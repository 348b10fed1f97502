"""The one table of Kafka error codes (``ErrorCode``) and the broker error classes written out from
it in ``errors.py``: the written classes are current, named as a Python user would guess, and the
names they had before still work."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from spark_kafka_sink import error_codes, errors
from spark_kafka_sink.error_codes import ErrorCode


def test_the_written_broker_errors_are_current():
    text = Path(errors.__file__).read_text(encoding="utf-8")
    section = text[text.index(error_codes.BEGIN):text.index(error_codes.END) + len(error_codes.END) + 1]
    assert section == error_codes.render_broker_errors(), (
        "errors.py is out of date with error_codes.py: run python -m spark_kafka_sink.error_codes")


@pytest.mark.parametrize("code", [c for c in ErrorCode if c is not ErrorCode.NONE], ids=lambda c: c.name)
def test_every_code_has_its_class(code):
    cls = errors.for_code(code)
    assert (cls.code, cls.name, cls.retriable, cls.invalid_metadata) == (
        int(code), code.name, code.retriable, code.invalid_metadata)
    assert getattr(errors, cls.__name__) is cls
    assert not cls.__name__.endswith(("ErrorError", "ExceptionError"))
    error = cls("context")
    assert str(error) == f"[Error {int(code)}] {code.name}: context"
    assert type(pickle.loads(pickle.dumps(error))) is cls


def test_names_a_python_user_would_guess_and_the_old_names_still_work():
    assert errors.for_code(17) is errors.InvalidTopicError is errors.InvalidTopicExceptionError
    assert errors.for_code(-1) is errors.UnknownServerError is errors.UnknownServerErrorError
    assert errors.for_code(13) is errors.NetworkError is errors.NetworkExceptionError
    assert errors.RecordTooLargeError is errors.MessageTooLargeError
    # a local error owns the natural name: the broker's class derives from it
    assert issubclass(errors.for_code(35), errors.UnsupportedVersionError)
    assert issubclass(errors.for_code(58), errors.AuthenticationError)


def test_error_code_maps_an_unknown_code_to_unknown_server_error():
    assert ErrorCode.for_code(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.for_code(0) is ErrorCode.NONE
    assert ErrorCode.for_code(12_345) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and ErrorCode.NOT_LEADER_OR_FOLLOWER.invalid_metadata
    assert not ErrorCode.UNKNOWN_SERVER_ERROR.retriable


def test_every_error_the_package_defines_is_in_the_one_hierarchy():
    from spark_kafka_sink.properties import PropertiesError
    from spark_kafka_sink.spark.jobs import JobError

    assert PropertiesError is errors.PropertiesError and JobError is errors.JobError
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, BaseException):
            assert issubclass(value, errors.KafkaError), name
    error = PropertiesError("conf/p.properties", 3, "key 'a' has no value")
    assert isinstance(error, ValueError) and str(error) == "conf/p.properties, line 3: key 'a' has no value"
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.source, copy.line) == (str(error), "conf/p.properties", 3)
