//! Fuzzes a connection's read buffer (framing, the budget of big frames, the room it reads
//! into and zeroes only once): a byte stream built from the input — raw bytes and well-formed
//! frames up to 256 KiB, so both the small and the big frame paths run — is handed out in reads
//! of input-chosen sizes, some received into uninitialised room and some (input-chosen) only
//! after a wait. Every frame must come out exactly as the stream holds it, a bad
//! length must be an error at the frame it starts, the budget must be given back, and nothing
//! may panic.
#![no_main]

use kelp::server::budget::RequestMemory;
use kelp::server::read_buffer::{ChunkedReader, ReadBuffer};
use libfuzzer_sys::fuzz_target;

const MAX: usize = 1 << 20;

/// The stream, read sizes and uninitialised-receive pattern an input describes.
fn build(input: &[u8]) -> (Vec<u8>, Vec<usize>, u32) {
    let (pattern, input) = input.split_at(input.len().min(4));
    let mut p = [0u8; 4];
    p[..pattern.len()].copy_from_slice(pattern);
    let pattern = u32::from_le_bytes(p);
    let (head, mut ops) = input.split_at(input.len().min(8));
    let mut chunks: Vec<usize> = head.iter().map(|&b| (b as usize).pow(2) * 3 + 1).collect();
    if chunks.is_empty() {
        chunks.push(4096);
    }
    let mut data = Vec::new();
    while let Some((&op, rest)) = ops.split_first() {
        ops = rest;
        if op & 1 == 0 {
            // Raw bytes, lengths and all, as a client may send them.
            let n = (op as usize >> 1).min(ops.len());
            data.extend_from_slice(&ops[..n]);
            ops = &ops[n..];
        } else if ops.len() >= 2 {
            // A well-formed frame of up to 256 KiB (big frames start past 64 KiB).
            let len = ((u16::from_be_bytes([ops[0], ops[1]]) as usize) << 2).max(10);
            ops = &ops[2..];
            data.extend_from_slice(&(len as u32).to_be_bytes());
            data.extend((0..len).map(|i| (i as u8).wrapping_mul(op) ^ 0x5a));
        }
    }
    // At most ~20k reads per input, so a megabyte in one-byte reads does not time out.
    let floor = data.len() / 20_000;
    (data, chunks.into_iter().map(|c| c + floor).collect(), pattern)
}

fuzz_target!(|input: &[u8]| {
    let (data, chunks, pattern) = build(input);
    let memory = RequestMemory::new(MAX + (64 << 10));
    let mut sock = ChunkedReader::new(data.clone(), chunks).with_uninit(pattern);
    let mut rb = ReadBuffer::new(memory.clone());
    let mut pos = 0;
    futures::executor::block_on(async {
        loop {
            match rb.next_frame(MAX).await {
                Ok(Ok((frame, lease))) => {
                    let len = u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
                    assert_eq!(&frame[..], &data[pos + 4..pos + 4 + len]);
                    pos += 4 + len;
                    drop(lease);
                }
                Ok(Err(need)) => {
                    rb.reserve(need, rb.buffered() == 0).await;
                    let n = rb.read(&mut sock, need).await.unwrap();
                    if n == 0 {
                        // The end: whatever is left is less than a frame.
                        assert_eq!(rb.buffered(), data.len() - pos);
                        break;
                    }
                }
                Err(_) => {
                    // A bad length, exactly where the next frame starts.
                    let len = i32::from_be_bytes(data[pos..pos + 4].try_into().unwrap());
                    assert!(
                        len < 10 || len as usize > MAX,
                        "refused a good length {len}"
                    );
                    break;
                }
            }
        }
    });
    drop(rb);
    assert_eq!(memory.used(), 0);
});
