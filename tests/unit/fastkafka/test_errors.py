"""fastkafka.errors: the error-code table, generated classes, client errors, pickling."""

from __future__ import annotations

import pathlib
import pickle

import pytest

import fastkafka.errors as E
from fastkafka.errors import KafkaError, error_for_code

# A sample of facts from Apache Kafka's Errors.java / protocol_errors page: code -> (NAME, retriable)
KNOWN = {
    -1: ("UNKNOWN_SERVER_ERROR", False), 1: ("OFFSET_OUT_OF_RANGE", False), 2: ("CORRUPT_MESSAGE", True),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True), 5: ("LEADER_NOT_AVAILABLE", True),
    6: ("NOT_LEADER_OR_FOLLOWER", True), 7: ("REQUEST_TIMED_OUT", True), 8: ("BROKER_NOT_AVAILABLE", False),
    9: ("REPLICA_NOT_AVAILABLE", True), 10: ("MESSAGE_TOO_LARGE", False), 13: ("NETWORK_EXCEPTION", True),
    15: ("COORDINATOR_NOT_AVAILABLE", True), 17: ("INVALID_TOPIC_EXCEPTION", False),
    18: ("RECORD_LIST_TOO_LARGE", False), 19: ("NOT_ENOUGH_REPLICAS", True),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True), 21: ("INVALID_REQUIRED_ACKS", False),
    29: ("TOPIC_AUTHORIZATION_FAILED", False), 35: ("UNSUPPORTED_VERSION", False),
    36: ("TOPIC_ALREADY_EXISTS", False), 41: ("NOT_CONTROLLER", True), 42: ("INVALID_REQUEST", False),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False), 46: ("DUPLICATE_SEQUENCE_NUMBER", False),
    47: ("INVALID_PRODUCER_EPOCH", False), 51: ("CONCURRENT_TRANSACTIONS", True),
    53: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False), 56: ("KAFKA_STORAGE_ERROR", True),
    59: ("UNKNOWN_PRODUCER_ID", False), 74: ("FENCED_LEADER_EPOCH", True), 75: ("UNKNOWN_LEADER_EPOCH", True),
    76: ("UNSUPPORTED_COMPRESSION_TYPE", False), 78: ("OFFSET_NOT_AVAILABLE", True),
    87: ("INVALID_RECORD", False), 89: ("THROTTLING_QUOTA_EXCEEDED", True), 90: ("PRODUCER_FENCED", False),
    100: ("UNKNOWN_TOPIC_ID", True), 103: ("INCONSISTENT_TOPIC_ID", True), 120: ("TRANSACTION_ABORTABLE", False),
}
INVALID_METADATA = {3, 5, 6, 9, 13, 56, 72, 74, 100, 103}


def test_table_covers_minus_one_to_127_without_gaps():
    codes = sorted(E.ERROR_TABLE)
    assert codes[0] == -1
    assert set(range(1, 128)) <= set(codes)
    assert 0 not in E.ERROR_TABLE  # NONE is not an error
    names = [row[0] for row in E.ERROR_TABLE.values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("code", sorted(KNOWN))
def test_known_facts(code):
    name, retriable = KNOWN[code]
    exc = error_for_code(code)
    assert exc.code == code and exc.name == name and exc.retriable is retriable
    assert exc.invalid_metadata is (code in INVALID_METADATA)
    assert isinstance(exc, KafkaError)


def test_invalid_metadata_implies_retriable():
    for code, (name, retriable, invalid_metadata, desc) in E.ERROR_TABLE.items():
        if invalid_metadata:
            assert retriable, name
        assert desc and desc[0].isupper(), name


@pytest.mark.parametrize("cls_name,code", [
    ("NotLeaderOrFollowerError", 6), ("UnknownTopicOrPartitionError", 3), ("MessageTooLargeError", 10),
    ("RequestTimedOutError", 7), ("DuplicateSequenceNumberError", 46), ("OutOfOrderSequenceNumberError", 45),
    ("UnknownProducerIdError", 59), ("CorruptMessageError", 2), ("InvalidProducerEpochError", 47),
    ("KafkaStorageError", 56), ("InvalidTopicError", 17), ("NetworkExceptionError", 13),
    ("BrokerInvalidRecordError", 87), ("UnknownServerError", -1), ("UnsupportedVersionError", 35),
    ("TopicAlreadyExistsError", 36), ("ProducerFencedError", 90), ("TransactionAbortableError", 120),
])
def test_generated_class_names(cls_name, code):
    cls = getattr(E, cls_name)
    assert cls.code == code
    assert type(error_for_code(code)) is cls
    assert cls.__module__ == "fastkafka.errors" and cls.__qualname__ == cls_name
    assert cls_name in E.__all__


def test_every_code_has_its_own_class():
    seen = set()
    for code in E.ERROR_TABLE:
        cls = type(error_for_code(code))
        assert cls not in seen
        seen.add(cls)
        assert cls.code == code and issubclass(cls, KafkaError)


def test_str_and_message():
    e = error_for_code(6)
    assert str(e).startswith("NOT_LEADER_OR_FOLLOWER (6): ")
    assert e.message == E.NotLeaderOrFollowerError.description
    e2 = error_for_code(6, "partition t-3 moved")
    assert str(e2) == "NOT_LEADER_OR_FOLLOWER (6): partition t-3 moved"
    assert e2.message == "partition t-3 moved"
    assert "NotLeaderOrFollowerError" in repr(e2)


def test_none_and_unknown_codes():
    assert error_for_code(0) is None
    e = error_for_code(4242)
    assert isinstance(e, E.UnknownServerError)
    assert e.code == 4242 and "4242" in str(e) and str(e).startswith("UNKNOWN_SERVER_ERROR (4242)")
    assert E.UnknownServerError.code == -1  # the class keeps its own code
    e2 = error_for_code(-77, "weird")
    assert e2.code == -77 and e2.message == "weird"


def test_client_side_classes():
    assert issubclass(E.ConfigError, ValueError) and issubclass(E.ConfigError, KafkaError)
    assert issubclass(E.InvalidRecordError, TypeError) and issubclass(E.InvalidRecordError, KafkaError)
    assert issubclass(E.UnknownPartitionError, ValueError)
    assert issubclass(E.BufferExhaustedError, E.KafkaTimeoutError)
    assert issubclass(E.DeliveryTimeoutError, E.KafkaTimeoutError)
    for cls in (E.DisconnectedError, E.CorrelationIdMismatchError, E.CorruptFrameError):
        assert issubclass(cls, E.NetworkError)
        assert cls.retriable and cls.invalid_metadata
    assert E.NetworkError.retriable and E.NetworkError.invalid_metadata
    assert E.KafkaTimeoutError.retriable and not E.KafkaTimeoutError.invalid_metadata
    for cls in (E.ConfigError, E.RecordTooLargeError, E.InvalidRecordError, E.UnknownPartitionError,
                E.ProducerClosedError, E.IllegalStateError):
        assert not cls.retriable
    client = [E.ConfigError, E.KafkaTimeoutError, E.BufferExhaustedError, E.DeliveryTimeoutError,
              E.RecordTooLargeError, E.InvalidRecordError, E.UnknownPartitionError, E.ProducerClosedError,
              E.NetworkError, E.DisconnectedError, E.CorrelationIdMismatchError, E.CorruptFrameError,
              E.IllegalStateError]
    codes = [c.code for c in client]
    assert all(c <= -100 for c in codes) and len(set(codes)) == len(codes)
    assert not set(codes) & set(E.ERROR_TABLE)
    assert str(E.ConfigError("linger_ms must be >= 0")) == "CONFIG_ERROR (-100): linger_ms must be >= 0"
    # client-side UnsupportedVersionError is the broker code-35 class
    assert E.UnsupportedVersionError.code == 35
    assert type(error_for_code(35)) is E.UnsupportedVersionError
    # ValueError-style catching works
    with pytest.raises(ValueError):
        raise E.ConfigError("x")
    with pytest.raises(TypeError):
        raise E.InvalidRecordError("value must be bytes")


ALL_INSTANCES = (
    [error_for_code(c) for c in E.ERROR_TABLE]
    + [error_for_code(999, "odd"), error_for_code(7, "custom message")]
    + [cls("msg") for cls in (E.ConfigError, E.KafkaTimeoutError, E.BufferExhaustedError,
                              E.DeliveryTimeoutError, E.RecordTooLargeError, E.InvalidRecordError,
                              E.UnknownPartitionError, E.ProducerClosedError, E.NetworkError,
                              E.DisconnectedError, E.CorrelationIdMismatchError, E.CorruptFrameError,
                              E.IllegalStateError, E.UnsupportedVersionError)]
    + [E.KafkaTimeoutError()]
)


@pytest.mark.parametrize("exc", ALL_INSTANCES, ids=lambda e: f"{type(e).__name__}-{e.code}")
def test_pickle_round_trip(exc):
    exc.extra = {"topic": "t", "partition": 3}  # attributes set by callers survive too
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(exc, protocol=proto))
        assert type(back) is type(exc)
        assert back.code == exc.code and back.message == exc.message and str(back) == str(exc)
        assert back.retriable == exc.retriable and back.invalid_metadata == exc.invalid_metadata
        assert back.extra == {"topic": "t", "partition": 3}
        assert back.args == exc.args


def test_pickle_across_processes():
    import subprocess
    import sys

    data = pickle.dumps([error_for_code(6, "moved"), E.DeliveryTimeoutError("expired"), error_for_code(555)])
    code = ("import pickle,sys; xs = pickle.loads(sys.stdin.buffer.read()); "
            "print('|'.join(f'{type(x).__name__}:{x.code}:{x.message}' for x in xs))")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True,
                         env={"PYTHONPATH": ":".join(p for p in sys.path if p)})
    assert out.stdout.decode().strip() == (
        "NotLeaderOrFollowerError:6:moved|DeliveryTimeoutError:-103:expired|"
        "UnknownServerError:555:Unknown error code 555 from the broker.")


def test_timeout_connection_errors_default_empty_and_pickled():
    plain = E.KafkaTimeoutError("x")
    assert dict(plain.connection_errors) == {}
    e = E.KafkaTimeoutError("topic 't' not present in metadata after 5 ms: could not connect ...")
    e.connection_errors = {"127.0.0.1:1": "connection refused"}
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is E.KafkaTimeoutError and str(back) == str(e)
    assert back.connection_errors == {"127.0.0.1:1": "connection refused"}
    assert dict(E.KafkaTimeoutError("y").connection_errors) == {}    # the class default is untouched


def test_every_public_name_is_written_in_the_source():
    # what a reader or a type checker sees: __all__ is a literal list and each name in it is bound
    # by a statement of its own at the top of errors.py (a class, a def or an assignment), none
    # made by a loop writing globals()
    import ast
    tree = ast.parse(pathlib.Path(E.__file__).read_text(encoding="utf-8"))
    bound, listed = set(), None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.add(target.id)
                    if target.id == "__all__":
                        listed = ast.literal_eval(node.value)
    assert listed is not None and sorted(listed) == sorted(E.__all__)
    assert len(listed) == len(set(listed))
    assert [n for n in listed if n not in bound] == []


def test_each_broker_class_is_assigned_to_the_name_it_carries():
    for code, cls in E._BY_CODE.items():
        if issubclass(cls, E.BrokerError):
            assert getattr(E, cls.__name__) is cls and cls.__name__ in E.__all__, code
    assert {c for c, cls in E._BY_CODE.items() if issubclass(cls, E.BrokerError)} == set(E.ERROR_TABLE)
