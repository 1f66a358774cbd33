# cython: language_level=3
# path:
#   set: set_network_failpoint -> set_failpoint_c

# Contract of fastkafka._net.failpoints: the network client's failpoints for fault-injection tests
# (see the .pyx docstring). It exports no C names: nothing in the library cimports or imports it.
