#!/usr/bin/env python3
"""CPU cost of appending in write + fdatasync rounds, page cache vs O_DIRECT.

    python3 perf/fsync_rounds.py [DIR] [ROUND_BYTES] [TOTAL_MIB]

Appends TOTAL_MIB (default 1024) to a new file in DIR (default ./kelp-fsync-rounds) in rounds
of ROUND_BYTES (default 131,584: one 128 KiB produce batch and its headers), each round
followed by fdatasync, and prints this process's CPU seconds (user + system) and wall time
for: buffered appends, O_DIRECT appends (rounds padded to 4 KiB blocks), buffered appends
without fdatasync, O_DIRECT appends without fdatasync (an acks=1 round). What Kelp's local log
does per round (src/log/direct.rs), without the broker around it. The file is removed
afterwards.

PREFILL=1 first writes the whole file with zeros (not counted), so the O_DIRECT rounds
overwrite blocks inside the file's size, as Kelp's rounds do behind the zeros it writes ahead
(src/log/prealloc.rs); without it every round grows the file.
"""
import mmap
import os
import resource
import sys
import time

BLOCK = 4096


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def prefill(path, total):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    zeros = bytes(1 << 20)
    for off in range(0, total + (4 << 20), len(zeros)):
        os.pwrite(fd, zeros, off)
    os.fdatasync(fd)
    os.close(fd)


def run(path, round_bytes, total, direct, sync):
    filled = os.environ.get("PREFILL") == "1"
    if filled:
        prefill(path, total)
    flags = os.O_RDWR | os.O_CREAT | (0 if filled else os.O_TRUNC) | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags, 0o644)
    n = -(-round_bytes // BLOCK) * BLOCK if direct else round_bytes
    buf = mmap.mmap(-1, n)  # page-aligned, as O_DIRECT needs
    buf.write(b"x" * n)
    os.sync()
    c0, t0, off, rounds = cpu(), time.time(), 0, 0
    while off < total:
        os.pwrite(fd, buf, off)
        if sync:
            os.fdatasync(fd)
        off += n
        rounds += 1
    c1, t1 = cpu(), time.time()
    os.close(fd)
    os.unlink(path)
    return c1 - c0, t1 - t0, rounds


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "./kelp-fsync-rounds"
    round_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 131584
    total = (int(sys.argv[3]) if len(sys.argv) > 3 else 1024) << 20
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "rounds")
    for name, direct, sync in [
        ("page cache + fdatasync", False, True),
        ("O_DIRECT + fdatasync", True, True),
        ("page cache, no fdatasync", False, False),
        ("O_DIRECT, no fdatasync", True, False),
    ]:
        c, t, rounds = run(path, round_bytes, total, direct, sync)
        gib = total / (1 << 30)
        print(f"{name:26s} {c / gib:5.2f} CPU-s/GiB  {t / gib:5.2f} s/GiB  {rounds} rounds", flush=True)


if __name__ == "__main__":
    main()
