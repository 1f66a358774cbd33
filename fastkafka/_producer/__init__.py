"""The producer layer: the accumulator and its batches, the send path of ``send()``/``produce()``/
``send_batch()``, the I/O thread (``Sender`` and its GIL-free turn), idempotence and transactions.
It imports the network, protocol and wire layers below it, never the API above it (docs/internals.md,
"Layers")."""
