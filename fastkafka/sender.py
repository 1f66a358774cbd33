"""The sender: the producer's background I/O thread.

Each turn of the loop (``run_once``): make sure an idempotent producer has its id, ask the accumulator
which leaders have sendable data, keep only the nodes the network client can send to now (connecting
the others), drain at most one batch per partition per node under ``max_request_size``, expire
batches that waited longer than ``delivery_timeout_ms``, queue one Produce request per node, and poll
the network. Produce requests are written, and their answers read, by the compiled codec
(:mod:`fastkafka._core.produce_codec`): no nested dicts per request or partition on this thread. Responses come back through :meth:`Sender._on_produce_response`, which completes,
retries or fails each batch; batch completion (futures, user callbacks) runs on this thread with no
lock held.
"""

from ._core.sender import PRODUCE_CODEC, Sender, set_failpoint

__all__ = ["PRODUCE_CODEC", "Sender", "set_failpoint"]
