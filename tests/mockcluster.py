"""librdkafka's mock cluster, driven through ctypes.

The confluent-kafka wheel ships librdkafka (``confluent_kafka.libs/librdkafka*.so*``); its experimental
mock-cluster API (``src/rdkafka_mock.h``) runs N in-process brokers on localhost listeners, with
leader moves, injected error codes, broker down/up and round-trip delays. It does not check CRCs.

    with MockCluster(3) as mc:
        mc.create_topic("t", 6)                 # leaders 1,2,3,1,2,3
        mc.push_request_errors(0, [6, 6])        # the next two Produce requests fail NOT_LEADER
        ... client with bootstrap.servers = mc.bootstraps ...
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading

__all__ = ["MockCluster", "MockClusterError", "load_librdkafka", "ApiKeys"]

RD_KAFKA_PRODUCER = 0
RD_KAFKA_CONF_OK = 0


class ApiKeys:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    API_VERSIONS = 18
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28


class MockClusterError(RuntimeError):
    pass


_lib = None
_lib_lock = threading.Lock()


def _find_librdkafka() -> str:
    import confluent_kafka

    pkg_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    site = os.path.dirname(pkg_dir)
    for pattern in (os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),
                    os.path.join(pkg_dir, ".libs", "librdkafka*.so*"),
                    os.path.join(pkg_dir, "librdkafka*.so*")):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise MockClusterError("no librdkafka found next to the confluent_kafka package "
                           "(`pip install confluent-kafka`, a manylinux wheel ships it)")


def load_librdkafka() -> ctypes.CDLL:
    """Load the wheel's librdkafka once and declare the functions this module calls."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(_find_librdkafka())
        vp, cp, i16, i32, i64, c_int, size_t = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int16,
                                                  ctypes.c_int32, ctypes.c_int64, ctypes.c_int,
                                                  ctypes.c_size_t)
        sig = {
            # rdkafka.h
            "rd_kafka_conf_new": (vp, []),
            "rd_kafka_conf_set": (c_int, [vp, cp, cp, ctypes.c_char_p, size_t]),
            "rd_kafka_conf_destroy": (None, [vp]),
            "rd_kafka_new": (vp, [c_int, vp, ctypes.c_char_p, size_t]),
            "rd_kafka_destroy": (None, [vp]),
            "rd_kafka_version_str": (cp, []),
            # rdkafka_mock.h
            "rd_kafka_mock_cluster_new": (vp, [vp, c_int]),
            "rd_kafka_mock_cluster_destroy": (None, [vp]),
            "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
            "rd_kafka_mock_clear_request_errors": (None, [vp, i16]),
            "rd_kafka_mock_push_request_errors_array": (None, [vp, i16, size_t, ctypes.POINTER(c_int)]),
            "rd_kafka_mock_broker_error_stack_cnt": (c_int, [vp, i32, i16, ctypes.POINTER(size_t)]),
            "rd_kafka_mock_topic_set_error": (None, [vp, cp, c_int]),
            "rd_kafka_mock_topic_create": (c_int, [vp, cp, c_int, c_int]),
            "rd_kafka_mock_partition_set_leader": (c_int, [vp, cp, i32, i32]),
            "rd_kafka_mock_broker_set_down": (c_int, [vp, i32]),
            "rd_kafka_mock_broker_set_up": (c_int, [vp, i32]),
            "rd_kafka_mock_broker_set_rtt": (c_int, [vp, i32, c_int]),
            "rd_kafka_mock_start_request_tracking": (None, [vp]),
            "rd_kafka_mock_stop_request_tracking": (None, [vp]),
            "rd_kafka_mock_get_requests": (ctypes.POINTER(vp), [vp, ctypes.POINTER(size_t)]),
            "rd_kafka_mock_clear_requests": (None, [vp]),
            "rd_kafka_mock_request_destroy": (None, [vp]),
            "rd_kafka_mock_request_id": (i32, [vp]),
            "rd_kafka_mock_request_api_key": (i16, [vp]),
            "rd_kafka_mock_request_timestamp": (i64, [vp]),
            "rd_kafka_mock_coordinator_set": (c_int, [vp, cp, cp, i32]),
        }
        for name, (restype, argtypes) in sig.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _lib = lib
        return lib


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


class MockCluster:
    """A librdkafka mock cluster with ``num_brokers`` brokers (ids 1..N)."""

    def __init__(self, num_brokers: int = 3, track_requests: bool = True):
        self._lib = load_librdkafka()
        lib = self._lib
        self.num_brokers = num_brokers
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in (("log_level", "3"), ("client.id", "fastkafka-mockcluster")):
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, len(errstr)) != RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(f"rd_kafka_conf_set({k}): {errstr.value.decode()}")
        rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not rk:
            lib.rd_kafka_conf_destroy(conf)  # rd_kafka_new only takes ownership on success
            raise MockClusterError(f"rd_kafka_new: {errstr.value.decode()}")
        self._rk = rk
        mc = lib.rd_kafka_mock_cluster_new(rk, num_brokers)
        if not mc:
            lib.rd_kafka_destroy(rk)
            raise MockClusterError("rd_kafka_mock_cluster_new returned NULL")
        self._mc = mc
        if track_requests:
            lib.rd_kafka_mock_start_request_tracking(mc)

    # -- helpers ---------------------------------------------------------------------------
    def _handle(self):
        if not getattr(self, "_mc", None):
            raise MockClusterError("mock cluster destroyed")
        return self._mc

    @staticmethod
    def _check(err: int, what: str) -> None:
        if err != 0:
            raise MockClusterError(f"{what} failed with librdkafka error {err}")

    @property
    def bootstraps(self) -> str:
        return self._lib.rd_kafka_mock_cluster_bootstraps(self._handle()).decode()

    def broker_address(self, broker_id: int) -> str:
        return self.bootstraps.split(",")[broker_id - 1]

    # -- topology -------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        self._check(self._lib.rd_kafka_mock_topic_create(self._handle(), name.encode(), partitions,
                                                         replication_factor), f"topic_create({name})")

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the partition's leader (-1: leader-less). Clients learn it via NOT_LEADER + Metadata."""
        self._check(self._lib.rd_kafka_mock_partition_set_leader(self._handle(), topic.encode(), partition,
                                                                 broker_id),
                    f"partition_set_leader({topic}, {partition}, {broker_id})")

    def set_topic_error(self, topic: str, error: int) -> None:
        """Error code returned for this topic in Metadata responses (0 clears it)."""
        self._lib.rd_kafka_mock_topic_set_error(self._handle(), topic.encode(), error)

    # -- faults ---------------------------------------------------------------------------
    def push_request_errors(self, api_key: int, errors: list[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` (on any broker) fail with these codes, in
        order. ``-195`` (RD_KAFKA_RESP_ERR__TRANSPORT) makes the broker drop the connection."""
        arr = (ctypes.c_int * len(errors))(*errors)
        self._lib.rd_kafka_mock_push_request_errors_array(self._handle(), api_key, len(errors), arr)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._handle(), api_key)

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        n = ctypes.c_size_t(0)
        self._check(self._lib.rd_kafka_mock_broker_error_stack_cnt(self._handle(), broker_id, api_key,
                                                                   ctypes.byref(n)),
                    f"broker_error_stack_cnt({broker_id})")
        return n.value

    def broker_down(self, broker_id: int) -> None:
        """Disconnect the broker's clients and refuse new connections (no leader change)."""
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id),
                    f"broker_set_down({broker_id})")

    def broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id),
                    f"broker_set_up({broker_id})")

    def set_rtt(self, broker_id: int, ms: int) -> None:
        """Delay every response of the broker (-1: all brokers) by ``ms`` milliseconds."""
        self._check(self._lib.rd_kafka_mock_broker_set_rtt(self._handle(), broker_id, ms),
                    f"broker_set_rtt({broker_id})")

    def set_coordinator(self, key_type: str, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator of ``key`` (``key_type`` "transaction" or "group"):
        FindCoordinator names it, and the other brokers answer NOT_COORDINATOR for that key."""
        self._check(self._lib.rd_kafka_mock_coordinator_set(self._handle(), key_type.encode(), key.encode(),
                                                            broker_id),
                    f"coordinator_set({key_type}, {key}, {broker_id})")

    def push_broker_errors_with_rtt(self, broker_id: int, api_key: int, errors_rtts: list[tuple[int, int]]) -> None:
        """The next requests of ``api_key`` on ``broker_id`` are answered with these ``(error code,
        round-trip ms)`` pairs in order: a large round trip is a coordinator that does not answer
        in time."""
        fn = self._lib.rd_kafka_mock_broker_push_request_error_rtts   # variadic: arguments typed here
        args = []
        for err, rtt in errors_rtts:
            args += [ctypes.c_int(err), ctypes.c_int(rtt)]
        self._check(fn(ctypes.c_void_p(self._handle()), ctypes.c_int32(broker_id), ctypes.c_int16(api_key),
                       ctypes.c_size_t(len(errors_rtts)), *args),
                    f"broker_push_request_error_rtts({broker_id}, {api_key})")

    # -- request tracking -----------------------------------------------------------------
    def requests(self) -> list[tuple[int, int, int]]:
        """Requests seen so far as ``(broker_id, api_key, timestamp_us)``."""
        lib = self._lib
        cnt = ctypes.c_size_t(0)
        arr = lib.rd_kafka_mock_get_requests(self._handle(), ctypes.byref(cnt))
        out = []
        if not arr:
            return out
        try:
            for i in range(cnt.value):
                req = arr[i]
                out.append((lib.rd_kafka_mock_request_id(req), lib.rd_kafka_mock_request_api_key(req),
                            lib.rd_kafka_mock_request_timestamp(req)))
                lib.rd_kafka_mock_request_destroy(req)
        finally:
            _libc.free(ctypes.cast(arr, ctypes.c_void_p))
        return out

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._handle())

    # -- lifecycle ------------------------------------------------------------------------
    def destroy(self) -> None:
        mc, self._mc = getattr(self, "_mc", None), None
        rk, self._rk = getattr(self, "_rk", None), None
        if mc:
            self._lib.rd_kafka_mock_cluster_destroy(mc)
        if rk:
            self._lib.rd_kafka_destroy(rk)

    def __enter__(self) -> "MockCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __del__(self):
        try:
            self.destroy()
        except Exception:
            pass
