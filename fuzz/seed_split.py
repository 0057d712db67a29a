"""Cuts a Kelp data dir's segments and offsets files into fuzz seeds (see seed-corpus.sh).

record_batch: single batches (one per topic and codec) and a two-batch produce region.
log_recovery: [chunk-size byte] + the first few batches of a segment, a torn copy, and the
group offsets files, the same way. Keeps the corpus small (< 1 MB, a few dozen files)."""

import glob
import hashlib
import os
import struct
import sys

data_dir, out = sys.argv[1], sys.argv[2]
rb = os.path.join(out, "record_batch")
lr = os.path.join(out, "log_recovery")
os.makedirs(rb, exist_ok=True)
os.makedirs(lr, exist_ok=True)


def save(d, blob):
    if len(blob) > 16384:
        return
    with open(os.path.join(d, hashlib.sha1(blob).hexdigest()[:16]), "wb") as f:
        f.write(blob)


def batches(seg):
    pos = 0
    while pos + 12 <= len(seg):
        (blen,) = struct.unpack_from(">i", seg, pos + 8)
        if blen < 49 or pos + 12 + blen > len(seg):
            return
        yield seg[pos:pos + 12 + blen]
        pos += 12 + blen


for path in sorted(glob.glob(os.path.join(data_dir, "topics", "*", "*.log"))):
    seg = open(path, "rb").read()
    bs = list(batches(seg))
    if not bs:
        continue
    # Produce regions carry base offset 0, as clients send them.
    zero = [b"\0" * 8 + b[8:] for b in bs]
    save(rb, zero[0])
    if len(zero) > 2:
        save(rb, zero[len(zero) // 2])
        save(rb, zero[0] + zero[1])
    head = b"".join(bs[:3])
    save(lr, bytes([200]) + head)
    save(lr, bytes([1]) + head[:-7])
for path in sorted(glob.glob(os.path.join(data_dir, "meta", "offsets-*.log"))):
    blob = open(path, "rb").read()
    if blob:
        save(lr, bytes([0]) + blob)
print({d: len(os.listdir(d)) for d in (rb, lr)})
