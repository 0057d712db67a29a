#!/usr/bin/env python3
"""What sending over loopback costs the sender, per GB: the floor under a broker's CPU per GB
consumed when its consumers are on the same host (as in every perf/ harness here).

A sender pinned to core 0 writes 4 GiB to a reader pinned to core 1 over 127.0.0.1, in
writes of SIZE bytes, one of three ways:

  copy      send(): the kernel copies the bytes into socket buffers (what Kelp's Fetch does,
            one sendmsg gathering the cached batches)
  zerocopy  send(MSG_ZEROCOPY) with SO_ZEROCOPY, completions read from the error queue
  sendfile  sendfile() from a memfd (page references instead of a copy, as from a page cache)

and prints each side's CPU seconds (user + system) per GB and the sender's GB/s. On loopback the
receive half of TCP (the softirq delivering to the reader's socket) runs on the sender's core,
so the sender pays it too.

    python3 perf/loopback_send.py [SIZE] [MODE ...]     defaults: 1048576, copy zerocopy sendfile
"""

import errno
import os
import resource
import socket
import sys
import time

TOTAL = 4 << 30
SO_ZEROCOPY = 60
MSG_ZEROCOPY = 0x4000000
SPAN = 256 << 20  # the memfd's size for sendfile


def cpu(usage):
    return usage.ru_utime + usage.ru_stime


def reader(port):
    os.sched_setaffinity(0, {1})
    c = socket.create_connection(("127.0.0.1", port))
    mv = memoryview(bytearray(8 << 20))
    got = 0
    while got < TOTAL:
        n = c.recv_into(mv)
        if n == 0:
            break
        got += n
    return cpu(resource.getrusage(resource.RUSAGE_SELF))


def send_all(s, mode, size):
    sent = 0
    if mode == "sendfile":
        fd = os.memfd_create("span")
        chunk = b"x" * (1 << 20)
        for _ in range(SPAN >> 20):
            os.write(fd, chunk)
        t0, r0 = time.time(), cpu(resource.getrusage(resource.RUSAGE_SELF))
        while sent < TOTAL:
            off = sent % SPAN
            sent += os.sendfile(s.fileno(), fd, off, min(size, SPAN - off))
        return t0, r0
    data = bytearray(b"x" * size)
    flags = 0
    if mode == "zerocopy":
        s.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
        flags = MSG_ZEROCOPY
    t0, r0 = time.time(), cpu(resource.getrusage(resource.RUSAGE_SELF))
    while sent < TOTAL:
        try:
            sent += s.send(data, flags)
        except OSError as e:
            # Too many completions not yet read: read them and send again.
            if e.errno != errno.ENOBUFS:
                raise
        while flags:
            try:
                s.recvmsg(0, 256, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
    return t0, r0


def run(mode, size):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, f"{reader(ls.getsockname()[1])}".encode())
        os._exit(0)
    os.close(w)
    os.sched_setaffinity(0, {0})
    s, _ = ls.accept()
    t0, c0 = send_all(s, mode, size)
    t1, c1 = time.time(), cpu(resource.getrusage(resource.RUSAGE_SELF))
    s.close()
    ls.close()
    theirs = float(os.read(r, 64))
    os.waitpid(pid, 0)
    gb = TOTAL / 1e9
    print(f"{mode:8} writes of {size}: sender {(c1 - c0) / gb:.3f} CPU-s/GB at "
          f"{gb / (t1 - t0):.2f} GB/s, reader {theirs / gb:.3f} CPU-s/GB")


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    for mode in sys.argv[2:] or ["copy", "zerocopy", "sendfile"]:
        if mode not in ("copy", "zerocopy", "sendfile"):
            sys.exit(f"mode: copy|zerocopy|sendfile, not {mode}")
        run(mode, size)


if __name__ == "__main__":
    main()
