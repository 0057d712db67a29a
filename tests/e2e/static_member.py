"""Helper process for test_static_membership: a kafka-python consumer with a fixed
group.instance.id that reports its generation and assignment, then keeps polling until
killed (or 60 s pass)."""

import sys
import time

from kafka import KafkaConsumer

bootstrap, topic, group, instance = sys.argv[1:5]
c = KafkaConsumer(
    topic,
    bootstrap_servers=bootstrap,
    group_id=group,
    group_instance_id=instance,
    session_timeout_ms=10000,
    heartbeat_interval_ms=500,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
)
deadline = time.monotonic() + 60
reported = False
while time.monotonic() < deadline:
    c.poll(timeout_ms=100)
    parts = sorted(tp.partition for tp in c.assignment())
    if parts and not reported:
        gen = c._coordinator._generation.generation_id
        member = c._coordinator._generation.member_id
        print(f"READY {gen} {member} {','.join(map(str, parts))}", flush=True)
        reported = True
