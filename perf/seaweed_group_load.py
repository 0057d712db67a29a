#!/usr/bin/env python3
"""How long a Kelp on SeaweedMQ takes to serve when the filer holds many groups' offsets.

Starts a SeaweedFS (scripts/seaweedfs.sh) on 127.0.0.1, a Kelp (the first binary) on it, commits
offsets for GROUPS groups (2 partitions each, confluent-kafka from scripts/install-deps.sh), then
starts each binary twice in turn and prints the seconds from its start until /health answers 200
(every shard has loaded its groups' offsets and serves). Stops everything it started, by PID.

    python3 perf/seaweed_group_load.py GROUPS KELP_BIN [KELP_BIN ...]

Environment: PORT (39777; the metrics port is PORT + 1), SW_BASEPORT (14100), KELP_CORES (0-1).
"""

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = pathlib.Path(__file__).resolve().parent.parent
PORT = int(os.environ.get("PORT", "39777"))
MPORT = PORT + 1


def start(binary, master, work):
    data = tempfile.mkdtemp(prefix="kelp-", dir=work)
    args = [binary, "--listen", f"127.0.0.1:{PORT}", "--advertised-host", "127.0.0.1",
            "--storage", "seaweedmq", "--seaweedmq-master", master, "--data-dir", data,
            "--cores", os.environ.get("KELP_CORES", "0-1"), "--forwarder-core", "1",
            "--metrics-addr", f"127.0.0.1:{MPORT}", "--log-level", "warn"]
    with open(f"{data}/kelp.out", "w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.time()
    while time.time() - t0 < 300 and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{MPORT}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, time.time() - t0
        except OSError:
            pass
        time.sleep(0.02)
    return proc, None


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    groups, binaries = int(sys.argv[1]), sys.argv[2:]
    work = tempfile.mkdtemp(prefix="kelp-group-load-")
    sw = f"{work}/seaweedfs"
    os.mkdir(sw)
    out = subprocess.run([ROOT / "scripts/seaweedfs.sh", "start", sw,
                          os.environ.get("SW_BASEPORT", "14100")],
                         capture_output=True, text=True, check=True).stdout
    master = out.strip().splitlines()[-1]
    try:
        proc, _ = start(binaries[0], master, work)
        try:
            bootstrap = f"127.0.0.1:{PORT}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("group-load", 2, 1)])["group-load"].result(30)
            t0 = time.time()
            for i in range(groups):
                c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"group-load-{i}",
                              "enable.auto.commit": False})
                c.commit(offsets=[TopicPartition("group-load", 0, 5),
                                  TopicPartition("group-load", 1, 7)], asynchronous=False)
                c.close()
            print(f"committed offsets of {groups} groups in {time.time() - t0:.1f} s", flush=True)
        finally:
            stop(proc)
        for _ in range(2):
            for b in binaries:
                proc, took = start(b, master, work)
                stop(proc)
                print(f"{b}: " + (f"ready after {took:.2f} s" if took else "not ready"),
                      flush=True)
    finally:
        subprocess.run([ROOT / "scripts/seaweedfs.sh", "stop", sw, "--kill"],
                       capture_output=True)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
