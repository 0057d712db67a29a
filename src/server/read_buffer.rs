//! A connection's read buffer: bytes read from the socket until they make whole request
//! frames, each handed over in an allocation of its own with its share of the broker-wide
//! request budget ([`RequestMemory`]). Calls `protocol::frame` for the length prefix and
//! `budget` for leases; `connection` is its user.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt};

use super::budget::{Lease, RequestMemory, IDLE_CHUNK};
use crate::config::READ_CHUNK;
use crate::error::ConnectionError;
use crate::protocol::frame;

/// A connection's read buffer and the share of the request budget it holds.
///
/// The buffer holds the bytes not yet taken as frames, at most a read chunk of them for small
/// frames: that chunk is the connection's own overhead (1 KiB while idle), not leased. Small
/// frames are copied out of it into an allocation of their own, leased as they are taken.
/// Every lease adds [`super::budget::REQUEST_OVERHEAD`] to the frame's length. A
/// frame bigger than a read chunk first takes its whole length from the budget — waiting, with
/// nothing leased, while the budget is spent — and is then read into a buffer that grows (at
/// most doubling what has arrived) to exactly the frame's size and is handed over whole, so
/// big produces are not copied. From a socket that can receive into uninitialised memory
/// ([`RecvUninit`]) the frame's bytes are received straight into that buffer; only a read
/// that has to wait for data zeroes its (small) room first. Nobody waits for the budget while
/// holding part of it, so connections cannot starve each other with half-read frames (they
/// could, when each partial buffer was leased as it grew: all of them waiting to grow, none
/// of them reading).
pub struct ReadBuffer {
    buf: BytesMut,
    /// Size of `buf`'s allocation (its `capacity()` shrinks as frames are taken off the
    /// front).
    alloc: usize,
    /// Bytes from the start of `buf` that hold initialised memory (the bytes read, and room
    /// zeroed for earlier reads that returned less): a read's room is zeroed only past it.
    /// Zeroing the whole room before every read of a big frame cost 4.5 % of the broker's
    /// CPU (memory storage, acks=1, perf/steady.sh), about as much as the bytes received.
    init: usize,
    /// The budget of the big frame at the front, once taken.
    frame_lease: Option<Lease>,
    memory: Arc<RequestMemory>,
}

impl ReadBuffer {
    /// Bytes read and not yet taken as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// An empty buffer drawing big frames' budget from `memory`.
    pub fn new(memory: Arc<RequestMemory>) -> Self {
        ReadBuffer {
            buf: BytesMut::new(),
            alloc: 0,
            init: 0,
            frame_lease: None,
            memory,
        }
    }

    /// The lease of the frame at the front ([`Lease::request`] of `len`): the
    /// one taken before reading it, or a new one (waiting for the budget).
    async fn frame_lease(&mut self, len: usize) -> Lease {
        match self.frame_lease.take() {
            Some(lease) => lease,
            None => Lease::request(&self.memory, len).await,
        }
    }

    /// Takes the next complete frame, with its own allocation and lease; `Err(need)` says
    /// how many bytes (prefix included) the frame at the front needs in all.
    pub async fn next_frame(
        &mut self,
        max: usize,
    ) -> Result<Result<(BytesMut, Lease), usize>, ConnectionError> {
        let len = match frame::peek_len(&self.buf, max)? {
            Some(len) => len,
            None => return Ok(Err(4)),
        };
        let total = 4 + len;
        if self.buf.len() < total {
            return Ok(Err(total));
        }
        let lease = self.frame_lease(len).await;
        if self.buf.len() == total && self.alloc <= total + total / 8 {
            // The buffer is this frame (and little more): hand it over, no copy.
            let mut frame = std::mem::take(&mut self.buf);
            frame.advance(4);
            self.alloc = 0;
            self.init = 0;
            return Ok(Ok((frame, lease)));
        }
        let frame = BytesMut::from(&self.buf[4..total]);
        self.buf.advance(total);
        self.init = self.init.saturating_sub(total);
        Ok(Ok((frame, lease)))
    }

    /// Makes room to read toward a frame of `need` bytes; a frame bigger than a read chunk
    /// takes its budget first (this waits while the budget is spent). `idle`: nothing in
    /// progress, so a small buffer will do.
    pub async fn reserve(&mut self, need: usize, idle: bool) {
        let have = self.buf.len();
        if have == 0 && idle && self.alloc > IDLE_CHUNK {
            // Give an idle connection's big buffer back.
            self.buf = BytesMut::new();
            self.alloc = 0;
            self.init = 0;
        }
        let target = if need > READ_CHUNK {
            if self.frame_lease.is_none() {
                self.frame_lease = Some(Lease::request(&self.memory, need - 4).await);
            }
            // Never allocated from the announced length alone: at most double what has
            // arrived, so a client announcing big frames and sending little holds little.
            need.min((2 * have).max(READ_CHUNK))
        } else if idle && have == 0 {
            IDLE_CHUNK
        } else {
            READ_CHUNK
        };
        if self.buf.capacity() > have && (self.buf.capacity() >= target || need <= READ_CHUNK) {
            return;
        }
        let target = target.max(have + 1);
        let mut grown = BytesMut::with_capacity(target);
        grown.extend_from_slice(&self.buf);
        self.buf = grown;
        self.alloc = target;
        self.init = have;
    }

    /// Reads what arrives into the reserved room, at most up to `need` for a big frame.
    pub async fn read<R: AsyncRead + RecvUninit + Unpin>(
        &mut self,
        stream: &mut R,
        need: usize,
    ) -> std::io::Result<usize> {
        let have = self.buf.len();
        let room = self.buf.capacity() - have;
        let mut want = if need > READ_CHUNK {
            room.min(need.saturating_sub(have).max(1))
        } else {
            room
        };
        if need > READ_CHUNK && stream.can_recv_uninit() {
            // What is there already goes straight into the frame's buffer. Zeroing its room
            // first, as a read into `&mut [u8]` must, was 4 % of the broker's CPU.
            let spare = &mut self.buf.spare_capacity_mut()[..want];
            if let Some(r) = stream.recv_uninit(spare) {
                let n = r?.min(want);
                // SAFETY: `recv_uninit` initialised the first `n` bytes of the spare room.
                unsafe { self.buf.set_len(have + n) };
                self.init = self.init.max(have + n);
                return Ok(n);
            }
            // Nothing there: wait for data with a small zeroed room; the rest of what
            // arrives then comes in by the branch above.
            want = want.min(WAIT_ROOM);
        }
        let end = have + want;
        if end <= self.init {
            // SAFETY: `end` is within the capacity (`want` <= `room`), and every byte below
            // `init` was initialised by an earlier read or zeroing of this allocation.
            unsafe { self.buf.set_len(end) };
        } else {
            // SAFETY: as above, for the bytes below `init`; `init` <= capacity.
            unsafe { self.buf.set_len(self.init.max(have)) };
            self.buf.resize(end, 0);
            self.init = end;
        }
        // Whatever happens to this future (it is dropped when a response is ready first),
        // the buffer ends with the bytes actually read, never the zeroed room.
        let mut keep = KeepRead {
            buf: &mut self.buf,
            len: have,
        };
        let r = stream.read(&mut keep.buf[have..]).await;
        if let Ok(n) = r {
            keep.len = have + n;
        }
        r
    }
}

/// Room a big frame's read zeroes to wait for data when the socket can otherwise receive into
/// uninitialised memory.
const WAIT_ROOM: usize = 16 * 1024;

/// A byte stream that can hand over what it holds already without waiting, into memory that
/// need not be initialised: a plain TCP socket (`recv` with `MSG_DONTWAIT`). Others (TLS)
/// keep the defaults and are read through [`AsyncRead`] only.
pub trait RecvUninit {
    /// Receives what is there into the front of `dst` and says how many bytes it wrote (0 at
    /// the end of the stream), or `None` if nothing is there yet (or the stream cannot do it).
    fn recv_uninit(&mut self, dst: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
        let _ = dst;
        None
    }

    /// Whether [`RecvUninit::recv_uninit`] can ever hand over bytes.
    fn can_recv_uninit(&self) -> bool {
        false
    }
}

/// Truncates a read buffer to the bytes read when dropped.
struct KeepRead<'a> {
    buf: &'a mut BytesMut,
    len: usize,
}

impl Drop for KeepRead<'_> {
    fn drop(&mut self) {
        self.buf.truncate(self.len);
    }
}

/// A reader that hands out fixed bytes in reads of the given sizes, in turn: the socket
/// stand-in of this module's test and of the `read_buffer` fuzz target.
pub struct ChunkedReader {
    data: Vec<u8>,
    at: usize,
    chunks: Vec<usize>,
    turn: usize,
    /// Bit `i % 32` set: the `i`th [`RecvUninit::recv_uninit`] call hands over a chunk
    /// (0: the reader cannot receive into uninitialised memory at all).
    uninit: u32,
    uninit_turn: u32,
}

impl ChunkedReader {
    /// Reads of `data` of the sizes in `chunks` (cycled; an empty list reads whole).
    pub fn new(data: Vec<u8>, chunks: Vec<usize>) -> ChunkedReader {
        ChunkedReader {
            data,
            at: 0,
            chunks,
            turn: 0,
            uninit: 0,
            uninit_turn: 0,
        }
    }

    /// The same reader, receiving into uninitialised memory on the calls `pattern`'s bits
    /// pick (cycled), and having nothing there (as a socket with no data yet) on the others.
    pub fn with_uninit(mut self, pattern: u32) -> ChunkedReader {
        self.uninit = pattern;
        self
    }

    /// The size of the next read of at most `room` bytes, counted as a turn.
    fn next_chunk(&mut self, room: usize) -> usize {
        let chunk = match self.chunks.len() {
            0 => usize::MAX,
            n => self.chunks[self.turn % n].max(1),
        };
        self.turn += 1;
        chunk.min(room).min(self.data.len() - self.at)
    }

    /// Bytes handed out so far.
    pub fn taken(&self) -> usize {
        self.at
    }
}

impl AsyncRead for ChunkedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let n = self.next_chunk(buf.len());
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Poll::Ready(Ok(n))
    }
}

impl RecvUninit for ChunkedReader {
    fn recv_uninit(&mut self, dst: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
        let bit = self.uninit_turn % 32;
        self.uninit_turn = self.uninit_turn.wrapping_add(1);
        if self.uninit & (1 << bit) == 0 {
            return None;
        }
        let n = self.next_chunk(dst.len());
        for (d, s) in dst.iter_mut().zip(&self.data[self.at..self.at + n]) {
            d.write(*s);
        }
        self.at += n;
        Some(Ok(n))
    }

    fn can_recv_uninit(&self) -> bool {
        self.uninit != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of every size class (tiny, around a read chunk, many chunks), with bytes that
    /// are never zero, so zeroed or stale room passed off as read bytes would show.
    fn frames() -> Vec<Vec<u8>> {
        [
            10,
            70_000,
            300_000,
            11,
            1 << 20,
            READ_CHUNK - 4,
            READ_CHUNK,
            200,
            150_000,
            12,
        ]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            (0..len)
                .map(|j| ((i * 31 + j * 7) % 255 + 1) as u8)
                .collect()
        })
        .collect()
    }

    fn read_all(chunks: Vec<usize>, idle_between: bool) {
        for uninit in [0, u32::MAX, 0b0110, 0x5555_5555] {
            read_all_with(chunks.clone(), idle_between, uninit);
        }
    }

    fn read_all_with(chunks: Vec<usize>, idle_between: bool, uninit: u32) {
        let want = frames();
        let mut data = Vec::new();
        for f in &want {
            data.extend_from_slice(&(f.len() as u32).to_be_bytes());
            data.extend_from_slice(f);
        }
        let total = data.len();
        let mut sock = ChunkedReader::new(data, chunks).with_uninit(uninit);
        let got = futures::executor::block_on(async {
            let memory = RequestMemory::new(4 << 20);
            let mut rb = ReadBuffer::new(memory.clone());
            let mut got = Vec::new();
            while got.len() < want.len() {
                match rb.next_frame(2 << 20).await.expect("well-formed frames") {
                    Ok((frame, lease)) => {
                        drop(lease);
                        got.push(frame.to_vec());
                    }
                    Err(need) => {
                        rb.reserve(need, idle_between && rb.buffered() == 0).await;
                        let n = rb.read(&mut sock, need).await.expect("read");
                        assert!(n > 0 || sock.taken() == total, "stuck before the end");
                    }
                }
            }
            assert_eq!(memory.used(), 0);
            assert_eq!(rb.buffered(), 0);
            got
        });
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "frame {i} ({} bytes) differs", w.len());
        }
    }

    #[test]
    fn tiny_frames_in_progress_pay_their_overhead_and_stop_at_the_budget() {
        use crate::server::budget::REQUEST_OVERHEAD;
        // 100 pipelined 10-byte requests, all kept in progress (their leases held): the
        // budget admits as many as fit with the overhead each, then the next one waits.
        let room = 5;
        let mut data = Vec::new();
        for _ in 0..100 {
            data.extend_from_slice(&10u32.to_be_bytes());
            data.extend_from_slice(&[7u8; 10]);
        }
        let mut sock = ChunkedReader::new(data, vec![1 << 20]);
        futures::executor::block_on(async {
            let memory = RequestMemory::new(room * (10 + REQUEST_OVERHEAD));
            let mut rb = ReadBuffer::new(memory.clone());
            rb.reserve(4, false).await;
            let n = rb.read(&mut sock, 4).await.expect("read");
            assert_eq!(n, 1400, "one read takes every frame");
            let mut held = Vec::new();
            loop {
                let polled = {
                    let next = rb.next_frame(1 << 20);
                    futures::pin_mut!(next);
                    futures::poll!(next)
                };
                match polled {
                    // Waiting for the budget (dropping the wait takes nothing).
                    std::task::Poll::Pending => break,
                    std::task::Poll::Ready(r) => match r.expect("well-formed frames") {
                        Ok(taken) => held.push(taken),
                        Err(_) => panic!("every frame is buffered"),
                    },
                }
            }
            assert_eq!(held.len(), room, "requests in progress past the budget");
            assert_eq!(memory.used(), room * (10 + REQUEST_OVERHEAD));
            held.clear();
            assert_eq!(memory.used(), 0);
        });
    }

    #[test]
    fn frames_read_in_any_chunks_come_out_whole_and_unchanged() {
        read_all(vec![1 << 30], false);
        read_all(vec![1, 7, 4096, READ_CHUNK, 100_000, 3], false);
        read_all(vec![5000, 1], true);
        read_all(vec![333], true);
    }
}
