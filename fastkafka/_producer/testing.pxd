# cython: language_level=3
# path:
#   drain: drain_nogil -> scan_c -> drain_c (GIL-free mode)
#   wait:  GilFreeProbe -> Poller.set_gil_free -> _probe_turn

# Contract of fastkafka._producer.testing: the test seams of the compiled core (see the .pyx
# docstring). It exports no C names: nothing in the library cimports or imports it.
