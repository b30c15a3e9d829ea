"""Smoke test of a Python client generated from proto/skein/v1 with protoc
and grpc_python_plugin, against a live gateway (tests/python/run.sh starts a
`skein dev` cluster, generates the client and runs this with /usr/bin/python3).

Usage: smoke_test.py HOST:PORT   (the gateway's gRPC address; the generated
modules must be on PYTHONPATH)
"""

import os
import sys
import time
import unittest

import grpc

from google.rpc import status_pb2
from skein.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    consumer_pb2,
    consumer_pb2_grpc,
    errors_pb2,
    producer_pb2,
    producer_pb2_grpc,
    records_pb2,
)

TIMEOUT = 15  # seconds, per call
GATEWAY = None  # set by main


def kafka_error(err):
    """The Kafka error name a failed call carries: the reason of the
    google.rpc.ErrorInfo detail with domain "skein" in the status details
    (the grpc-status-details-bin trailer). None when there is none."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        st = status_pb2.Status.FromString(value)
        for detail in st.details:
            info = status_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == "skein":
                return info.reason
    return None


class SkeinClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ca = os.environ.get("SKEIN_TLS_CA")
        if ca:
            # A secured gateway: TLS with the cluster's CA and the client
            # certificate skein dev --secure issued.
            def read(name):
                path = os.environ.get(name)
                return open(path, "rb").read() if path else None
            creds = grpc.ssl_channel_credentials(
                root_certificates=read("SKEIN_TLS_CA"),
                private_key=read("SKEIN_TLS_KEY"),
                certificate_chain=read("SKEIN_TLS_CERT"))
            cls.channel = grpc.secure_channel(GATEWAY, creds)
        else:
            cls.channel = grpc.insecure_channel(GATEWAY)
        grpc.channel_ready_future(cls.channel).result(timeout=TIMEOUT)
        cls.admin = admin_pb2_grpc.AdminServiceStub(cls.channel)
        cls.producer = producer_pb2_grpc.ProducerServiceStub(cls.channel)
        cls.consumer = consumer_pb2_grpc.ConsumerServiceStub(cls.channel)
        # A fresh name, so the test also runs against a cluster that has run it.
        cls.topic = "py-smoke-%d" % time.time_ns()
        resp = cls.admin.CreateTopic(
            admin_pb2.CreateTopicRequest(
                name=cls.topic,
                partitions=3,
                replication_factor=3,
                configs={"min.insync.replicas": "2"},
            ),
            timeout=TIMEOUT,
        )
        assert resp.topic.name == cls.topic, resp

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def fetch_all(self, partition, offset, count):
        """Fetches partition from offset until count records have arrived."""
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            resp = self.consumer.Fetch(
                consumer_pb2.FetchRequest(
                    topic=self.topic, partition=partition, offset=offset, max_wait_ms=1000
                ),
                timeout=TIMEOUT,
            )
            got.extend(resp.records)
            offset = resp.next_offset
        return got

    def test_create_topic(self):
        resp = self.admin.DescribeTopic(
            admin_pb2.DescribeTopicRequest(topic=self.topic), timeout=TIMEOUT
        )
        self.assertEqual(resp.topic.name, self.topic)
        self.assertEqual(resp.topic.replication_factor, 3)
        self.assertEqual(resp.topic.configs.get("min.insync.replicas"), "2")
        self.assertEqual(sorted(p.partition for p in resp.topic.partitions), [0, 1, 2])
        for p in resp.topic.partitions:
            self.assertEqual(len(p.replicas), 3, p)
            self.assertIn(p.leader, p.replicas, p)

    def test_produce_then_fetch(self):
        # Key user-1 lands on partition 2 of 3, as with Kafka's Java client.
        resp = self.producer.Produce(
            producer_pb2.ProduceRequest(
                topic=self.topic,
                records=[
                    records_pb2.ProduceRecord(key="user-1", value="hello"),
                    records_pb2.ProduceRecord(
                        key="user-1",
                        value="world",
                        headers=[records_pb2.Header(key="source", value="python")],
                    ),
                    records_pb2.ProduceRecord(key="user-1", value_bytes=b"\x00\x01\xfe\xff"),
                ],
            ),
            timeout=TIMEOUT,
        )
        self.assertEqual(len(resp.results), 3)
        for r in resp.results:
            self.assertEqual(errors_pb2.ErrorCode.Name(r.error_code), "NONE", r)
            self.assertEqual(r.outcome, producer_pb2.WRITTEN, r)
            self.assertEqual(r.partition, 2, r)
        offsets = [r.offset for r in resp.results]
        self.assertEqual(offsets, list(range(offsets[0], offsets[0] + 3)))

        got = self.fetch_all(2, offsets[0], 3)
        self.assertEqual([r.offset for r in got], offsets)
        self.assertEqual([r.key for r in got], ["user-1"] * 3)
        self.assertEqual(got[0].value, "hello")
        self.assertEqual(got[1].value, "world")
        # The gateway may add a W3C traceparent header to records that have none.
        headers = [(h.key, h.value) for h in got[1].headers if h.key != "traceparent"]
        self.assertEqual(headers, [("source", "python")])
        self.assertFalse(got[2].HasField("value"))
        self.assertEqual(got[2].value_bytes, b"\x00\x01\xfe\xff")
        for r in got:
            self.assertEqual((r.topic, r.partition), (self.topic, 2))

    def test_produce_stream_then_fetch(self):
        requests, per_request = 20, 5

        def requests_iter():
            for i in range(1, requests + 1):
                yield producer_pb2.ProduceStreamRequest(
                    correlation_id=i,
                    topic=self.topic,
                    records=[
                        records_pb2.ProduceRecord(value="stream-%d-%d" % (i, j), partition=0)
                        for j in range(per_request)
                    ],
                )

        answered = {}
        for resp in self.producer.ProduceStream(requests_iter(), timeout=TIMEOUT):
            self.assertNotIn(resp.correlation_id, answered)
            answered[resp.correlation_id] = resp.results
        self.assertEqual(sorted(answered), list(range(1, requests + 1)))

        offset_of = {}
        for cid, results in answered.items():
            self.assertEqual(len(results), per_request)
            for j, r in enumerate(results):
                self.assertEqual(errors_pb2.ErrorCode.Name(r.error_code), "NONE", r)
                self.assertEqual(r.partition, 0, r)
                offset_of["stream-%d-%d" % (cid, j)] = r.offset
        self.assertEqual(len(set(offset_of.values())), requests * per_request)

        first = min(offset_of.values())
        got = self.fetch_all(0, first, requests * per_request)
        self.assertEqual({r.value: r.offset for r in got}, offset_of)
        # Within a stream request, records keep their order in the log.
        for i in range(1, requests + 1):
            offs = [offset_of["stream-%d-%d" % (i, j)] for j in range(per_request)]
            self.assertEqual(offs, sorted(offs))

    def test_unknown_topic_is_not_found_with_kafka_name(self):
        calls = {
            "Fetch": lambda: self.consumer.Fetch(
                consumer_pb2.FetchRequest(topic="py-no-such-topic", partition=0, offset=0),
                timeout=TIMEOUT,
            ),
            "Produce": lambda: self.producer.Produce(
                producer_pb2.ProduceRequest(
                    topic="py-no-such-topic", records=[records_pb2.ProduceRecord(value="v")]
                ),
                timeout=TIMEOUT,
            ),
            "DescribeTopic": lambda: self.admin.DescribeTopic(
                admin_pb2.DescribeTopicRequest(topic="py-no-such-topic"), timeout=TIMEOUT
            ),
        }
        for name, call in calls.items():
            with self.subTest(call=name):
                with self.assertRaises(grpc.RpcError) as cm:
                    call()
                err = cm.exception
                self.assertEqual(err.code(), grpc.StatusCode.NOT_FOUND, err)
                self.assertEqual(kafka_error(err), "UNKNOWN_TOPIC_OR_PARTITION", err)
        # The name is one of the public ErrorCode enum's.
        self.assertEqual(errors_pb2.ErrorCode.Value("UNKNOWN_TOPIC_OR_PARTITION"), 3)

    def test_existing_topic_is_already_exists_with_kafka_name(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.admin.CreateTopic(
                admin_pb2.CreateTopicRequest(name=self.topic, partitions=3), timeout=TIMEOUT
            )
        self.assertEqual(cm.exception.code(), grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(kafka_error(cm.exception), "TOPIC_ALREADY_EXISTS")


def main():
    global GATEWAY
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    GATEWAY = sys.argv[1]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(SkeinClient)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    print("python client: %d passed, %d failed" % (max(result.testsRun - failed, 0), failed))
    sys.exit(0 if result.wasSuccessful() and result.testsRun > 0 else 1)


if __name__ == "__main__":
    main()
