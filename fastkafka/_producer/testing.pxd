# cython: language_level=3
# Contract of fastkafka._producer.testing: the test seams of the compiled core (see the .pyx
# docstring). It exports no C names: nothing in the library cimports or imports it.
