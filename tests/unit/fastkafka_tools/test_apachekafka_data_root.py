"""Where KafkaCluster keeps its nodes' data, and how benchmark reports name that place."""
import os
import tempfile

import pytest

from fastkafka_tools import apachekafka
from fastkafka_tools.apachekafka import KafkaCluster, data_place


def _mounts(tmp_path, text):
    p = tmp_path / "mounts"
    p.write_text(text)
    return str(p)


@pytest.fixture
def fake_mounts(monkeypatch, tmp_path):
    """data_place reads /proc/mounts; hand it a file of our own."""
    real_open = open

    def install(text):
        path = _mounts(tmp_path, text)

        def fake_open(name, *a, **kw):
            return real_open(path if name == "/proc/mounts" else name, *a, **kw)

        monkeypatch.setattr(apachekafka, "open", fake_open, raising=False)
    return install


def test_longest_mount_point_decides(fake_mounts):
    fake_mounts("/dev/vda / ext4 rw 0 0\n"
                "tmpfs /dev/shm tmpfs rw 0 0\n"
                "tmpfs /dev/shmx tmpfs rw 0 0\n")
    assert data_place("/dev/shm/fastkafka-kafka-1") == "in memory (tmpfs at /dev/shm)"
    assert data_place("/devx/y") == "on local disk (ext4)"
    # a mount point that is only a prefix of the path's name is not its mount
    fake_mounts("/dev/vda / xfs rw 0 0\ntmpfs /dev/sh tmpfs rw 0 0\n")
    assert data_place("/dev/shm/x") == "on local disk (xfs)"


def test_unreadable_mounts_say_local_disk(monkeypatch):
    def refuse(name, *a, **kw):
        raise PermissionError(name)

    monkeypatch.setattr(apachekafka, "open", refuse, raising=False)
    assert data_place("/anywhere") == "on local disk"


def test_data_root_argument_and_environment(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.setenv("FASTKAFKA_KAFKA_DATA_ROOT", str(b))
    kc = KafkaCluster(nodes=1, data_root=str(a))
    try:
        assert os.path.dirname(kc.base_dir) == str(a)
    finally:
        kc.stop()
    assert not os.path.exists(kc.base_dir)          # its own directory, removed at stop
    kc = KafkaCluster(nodes=1)
    try:
        assert os.path.dirname(kc.base_dir) == str(b)
    finally:
        kc.stop()
    monkeypatch.delenv("FASTKAFKA_KAFKA_DATA_ROOT")
    kc = KafkaCluster(nodes=1)
    try:
        assert os.path.dirname(kc.base_dir) == tempfile.gettempdir()
    finally:
        kc.stop()
