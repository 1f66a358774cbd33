"""Broker throttling (KIP-219) against Apache Kafka's own client quotas.

A producer byte-rate quota is set for one client id on the session's Kafka node at runtime (dynamic
client quotas, through Kafka's Java ``Admin.alterClientQuotas``: fastkafka's Admin has no quota API,
and Kafka 4.x ships no ConfigCommand jar in the rig). A producer with that client id writes many
times its quota per second; the broker answers with ``throttle_time_ms`` and the producer must hold
back (no new request to that broker until the throttle ends), count it in ``metrics()``, deliver every
record (read back by confluent-kafka, CRCs checked), and its average rate must stay near the quota.

Kafka measures a client's rate over ``quota.window.num`` (11) windows of one second and, at first,
as if the full window had passed: about ten seconds' worth of the quota goes through unthrottled.
The rate bound below allows for that window.
"""
from __future__ import annotations

import re
import subprocess
import time

import pytest

from brokers import read_back, unique_name
from fastkafka import Producer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

QUOTA = 256 * 1024          # producer_byte_rate, bytes per second
RECORDS = 4000
VALUE = 1000                # bytes per value: ~4 MB in all, ~15 s of quota
WINDOW_S = 11               # quota.window.num * quota.window.size.seconds (Kafka's defaults)

# Kafka's Java Admin client, run as a single-file source program on the broker's classpath.
SET_QUOTA_JAVA = """
import java.util.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.quota.*;

public class SetClientQuota {
    // args: bootstrap client-id quota-key value|none
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        try (Admin admin = Admin.create(p)) {
            ClientQuotaEntity e = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, a[1]));
            Double value = a[3].equals("none") ? null : Double.valueOf(a[3]);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(e,
                List.of(new ClientQuotaAlteration.Op(a[2], value))))).all().get();
            // The broker applies the quota once the controller's metadata reaches it: wait for
            // the broker to describe what was set.
            ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, a[1])));
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                Map<ClientQuotaEntity, Map<String, Double>> got = admin.describeClientQuotas(filter).entities().get();
                Map<String, Double> q = got.getOrDefault(e, Map.of());
                if (Objects.equals(q.get(a[2]), value) || System.currentTimeMillis() > deadline) {
                    System.out.println("QUOTAS " + got);
                    break;
                }
                Thread.sleep(20);
            }
        }
    }
}
"""


@pytest.fixture
def set_quota(kafka_broker, tmp_path):
    """``set_quota(client_id, producer_byte_rate)``: a dynamic client quota on the session's node,
    removed again at the end of the test."""
    from fastkafka_tools.apachekafka import java_command

    src = tmp_path / "SetClientQuota.java"
    src.write_text(SET_QUOTA_JAVA)
    set_for = []

    def run(client_id: str, value) -> str:
        cmd = java_command("broker", kafka_broker.version, 128) + [
            str(src), kafka_broker.bootstrap, client_id, "producer_byte_rate", str(value)]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc.stdout

    def set_(client_id: str, rate: int) -> None:
        out = run(client_id, rate)
        set_for.append(client_id)
        m = re.search(r"client-id=%s}\)={producer_byte_rate=([0-9.E]+)}" % re.escape(client_id), out)
        assert m and float(m.group(1)) == rate, out

    yield set_
    for client_id in set_for:
        run(client_id, "none")


def produce(bootstrap: str, topic: str, client_id: str):
    values = [b"%06d" % i + bytes([65 + i % 26]) * (VALUE - 6) for i in range(RECORDS)]
    with Producer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5,
                  delivery_timeout_ms=120_000) as p:
        t0 = time.monotonic()
        futs = [p.send(topic, v, partition=0) for v in values]
        offsets = [f.get(timeout=120).offset for f in futs]
        elapsed = time.monotonic() - t0
        metrics = p.metrics()
    assert offsets == list(range(RECORDS))
    return values, elapsed, metrics


def test_a_producer_byte_rate_quota_throttles_and_every_record_arrives(kafka_broker, set_quota):
    client_id = unique_name("quota")
    set_quota(client_id, QUOTA)
    topic = unique_name("quota")
    kafka_broker.create_topic(topic, 1)
    values, elapsed, m = produce(kafka_broker.bootstrap, topic, client_id)
    sent = sum(len(v) for v in values)
    rate = sent / elapsed
    print(f"\n{sent} B in {elapsed:.1f} s ({rate / 1024:.0f} KiB/s, quota {QUOTA / 1024:.0f} KiB/s); "
          f"{m['net_throttled_responses']} throttled responses, {m['net_throttle_time_ms_total']} ms")
    assert m["net_throttled_responses"] > 0, m
    assert m["net_throttle_time_ms_total"] > 0, m
    # Roughly the quota: what went through fits the quota over the elapsed time plus Kafka's
    # measuring window (allowing 50 %), and the throttling really slowed the producer down (it
    # writes these ~4 MB in well under a second unthrottled).
    assert sent / (elapsed + WINDOW_S) < 1.5 * QUOTA, (sent, elapsed)
    assert elapsed > 0.5 * (sent / QUOTA - WINDOW_S), (sent, elapsed)
    got = read_back(kafka_broker.bootstrap, topic, 1, RECORDS, timeout=60)[0]
    assert [msg.value for msg in got] == values


def test_another_client_id_is_not_throttled(kafka_broker, set_quota):
    """The control: the same load under a client id without a quota is never throttled."""
    set_quota(unique_name("quota"), QUOTA)
    topic = unique_name("noquota")
    kafka_broker.create_topic(topic, 1)
    values, elapsed, m = produce(kafka_broker.bootstrap, topic, unique_name("free"))
    assert m["net_throttled_responses"] == 0 and m["net_throttle_time_ms_total"] == 0, m
    assert elapsed < 0.5 * (sum(len(v) for v in values) / QUOTA - WINDOW_S), elapsed
    got = read_back(kafka_broker.bootstrap, topic, 1, RECORDS, timeout=60)[0]
    assert [msg.value for msg in got] == values
