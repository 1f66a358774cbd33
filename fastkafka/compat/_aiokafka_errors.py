"""aiokafka's structures and error classes for :mod:`fastkafka.compat.aiokafka`: aiokafka's own
when it is installed (each error it raises then also the matching ``fastkafka.errors`` class, so
``except`` either name works), classes of the same names and shapes otherwise."""
from __future__ import annotations

from collections import namedtuple

from fastkafka import errors as _fk

# -- aiokafka's structures and errors: its own when installed ----------------------------------
try:
    from aiokafka import errors as _peer
    from aiokafka.structs import (OffsetAndMetadata, RecordMetadata,  # type: ignore[assignment]
                                  TopicPartition)
except ImportError:     # aiokafka not installed: classes of the same names and shapes
    _peer = None
    TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])
    OffsetAndMetadata = namedtuple("OffsetAndMetadata", ["offset", "metadata"])
    RecordMetadata = namedtuple("RecordMetadata", [
        "topic", "partition", "topic_partition", "offset", "timestamp", "timestamp_type",
        "log_start_offset"])


class _OwnErrors:
    """aiokafka's error names, for when aiokafka is not installed: each a fastkafka class."""

    class KafkaError(_fk.KafkaError):
        pass

    class KafkaTimeoutError(_fk.KafkaTimeoutError):
        pass

    class KafkaConnectionError(_fk.NetworkError):
        pass

    class MessageSizeTooLargeError(_fk.RecordTooLargeError):
        pass

    class IllegalOperation(_fk.IllegalStateError):
        pass

    class IllegalStateError(_fk.IllegalStateError):
        pass

    class ProducerClosed(_fk.ProducerClosedError):
        pass

    class ProducerFenced(_fk.KafkaError):
        pass

    class UnknownTopicOrPartitionError(_fk.KafkaError):
        pass

    class AuthenticationFailedError(_fk.KafkaError):
        pass

    class UnsupportedCodecError(_fk.KafkaError):
        pass


#: aiokafka's error classes as this layer raises them: ``aiokafka.errors`` when installed.
errors = _peer if _peer is not None else _OwnErrors

_DUALS: dict[tuple[type, type], type] = {}


def _dual(peer_cls: type, fk_cls: type) -> type:
    """A class that is both aiokafka's ``peer_cls`` and fastkafka's ``fk_cls`` (with aiokafka's
    name and message format), so ``except aiokafka.errors.X`` and ``except fastkafka.errors.Y``
    both catch it."""
    if issubclass(peer_cls, fk_cls):
        return peer_cls
    if issubclass(fk_cls, peer_cls):
        return fk_cls
    key = (peer_cls, fk_cls)
    cls = _DUALS.get(key)
    if cls is None:
        def __init__(self, message=None, *args):
            fk_cls_init(self, message)
            if args:
                self.args = (message,) + args

        fk_cls_init = _fk.KafkaError.__init__ if issubclass(fk_cls, _fk.KafkaError) else \
            Exception.__init__

        def __repr__(self):
            return f"{type(self).__name__}({', '.join(map(repr, self.args))})"

        def __str__(self):      # aiokafka's format ("[Error 3] Name: text"), over fastkafka's
            text = BaseException.__str__(self)
            if _peer is None or not issubclass(peer_cls, _peer.KafkaError):
                return text
            out = f"{peer_cls.__name__}: {text}" if self.args else peer_cls.__name__
            if issubclass(peer_cls, _peer.BrokerResponseError):
                out = f"[Error {peer_cls.errno}] {out}"
            return out

        def __reduce__(self):
            return (_rebuild_dual, (peer_cls, fk_cls, self.args, dict(self.__dict__)))

        cls = type(peer_cls.__name__, (peer_cls, fk_cls),
                   {"__module__": peer_cls.__module__, "__qualname__": peer_cls.__qualname__,
                    "__init__": __init__, "__repr__": __repr__, "__reduce__": __reduce__,
                    "__str__": __str__})
        _DUALS[key] = cls
    return cls


def _rebuild_dual(peer_cls, fk_cls, args, state):
    cls = _dual(peer_cls, fk_cls)
    e = cls.__new__(cls, *args)
    e.args = args
    e.__dict__.update(state)
    return e


def _error(name: str, fk_cls: type, message: str | None = None) -> BaseException:
    """A new error of aiokafka's class ``name`` that is also ``fk_cls``."""
    cls = _dual(getattr(errors, name), fk_cls)
    return cls(message) if message is not None else cls()


def _peer_class_for(exc: BaseException) -> type | None:
    """aiokafka's class for a fastkafka error (None: raise it as it is)."""
    if not isinstance(exc, _fk.KafkaError):
        return None
    code = exc.code
    if code in (47, 90):        # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED: aiokafka's ProducerFenced
        return errors.ProducerFenced
    if isinstance(exc, _fk.BrokerError):    # without aiokafka: fastkafka's class of the code
        return _peer.for_code(code) if _peer is not None and code is not None else None
    if isinstance(exc, _fk.ConfigError) or isinstance(exc, _fk.InvalidRecordError):
        return None             # ValueError / TypeError, as aiokafka raises for these
    if isinstance(exc, _fk.RecordTooLargeError):
        return errors.MessageSizeTooLargeError
    if isinstance(exc, _fk.KafkaTimeoutError):
        return errors.KafkaTimeoutError
    if isinstance(exc, _fk.ProducerClosedError):
        return errors.ProducerClosed
    if isinstance(exc, (_fk.SaslAuthenticationError, _fk.TlsAuthenticationError)):
        return errors.AuthenticationFailedError
    if isinstance(exc, (_fk.NetworkError, _fk.AllBrokersDownError)):
        return errors.KafkaConnectionError
    if isinstance(exc, _fk.IllegalStateError):
        return errors.IllegalStateError
    return errors.KafkaError


def _convert(exc: BaseException, peer_cls: type | None = None) -> BaseException:
    """``exc`` (a fastkafka error) as an instance of aiokafka's class for it that is also its own
    class: its message, attributes, cause and traceback kept."""
    if peer_cls is None:
        peer_cls = _peer_class_for(exc)
        if peer_cls is None or isinstance(exc, peer_cls):
            return exc
    cls = _dual(peer_cls, type(exc))
    new = cls.__new__(cls, *exc.args)
    new.args = exc.args
    new.__dict__.update(exc.__dict__)
    new.__cause__, new.__context__ = exc.__cause__, exc.__context__
    new.__suppress_context__ = exc.__suppress_context__
    return new.with_traceback(exc.__traceback__)
