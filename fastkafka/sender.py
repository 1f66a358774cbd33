"""The sender: the producer's background I/O thread, compiled (:mod:`fastkafka._core.sender`; its
docstring describes a turn of the loop). This module is its public name."""

from ._core.sender import PRODUCE_CODEC, Sender, set_failpoint

__all__ = ["PRODUCE_CODEC", "Sender", "set_failpoint"]
