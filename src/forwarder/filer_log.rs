//! Reads a partition's flushed SeaweedMQ log files straight from the filer.
//!
//! Why: a SeaweedMQ broker that (re)loads a partition with no publisher (after Kelp or the
//! broker restarted) initialises its read buffer from the files' `offset_max` attributes, and
//! the broker does not write those attributes on a file whose first offset is 0. Such a
//! partition's FetchMessage then answers "empty, high water mark 0" although the records are
//! on the filer, until someone publishes to it again. When FetchMessage cannot serve offsets
//! the broker's own range says exist, the forwarder reads the files itself: each is a sequence
//! of `[u32 big-endian size][filer_pb.LogEntry]`, and every entry carries its offset.
//! Files are fetched over the filer's HTTP port; the last file read is kept, as consumers
//! read sequentially. Runs on the forwarder thread; calls the filer only.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use kelp_storage_client::filer::{self, FilerClient};
use kelp_storage_client::pb::filer_pb::LogEntry;
use kelp_storage_client::pb::schema_pb;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Deadline of one file download.
const GET_TIMEOUT: Duration = Duration::from_secs(10);

/// Entries of one log file, in file order.
type Entries = Rc<Vec<LogEntry>>;

/// The partition's directory: `/topics/<ns>/<name>/v<generation, UTC>/<start>-<stop>`.
pub fn partition_dir(topic: &schema_pb::Topic, p: &schema_pb::Partition) -> String {
    format!(
        "/topics/{}/{}/v{}/{:04}-{:04}",
        topic.namespace,
        topic.name,
        utc_stamp(p.unix_time_ns),
        p.range_start,
        p.range_stop
    )
}

/// "2006-01-02-15-04-05" (SeaweedFS's version directory format) of a time in ns, UTC.
fn utc_stamp(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}-{:02}-{:02}-{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// UTC ms of a "2006-01-02-15-04-05" name (SeaweedFS names a partition's log files after the
/// first record they hold, to the second), or None for another name.
fn parse_stamp(name: &str) -> Option<i64> {
    let parts: Vec<i64> = name
        .split('-')
        .map(|p| p.parse::<i64>().ok().filter(|_| !p.is_empty()))
        .collect::<Option<_>>()?;
    let [y, m, d, hh, mm, ss] = parts.as_slice() else {
        return None;
    };
    let (y, m, d) = (*y, *m, *d);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || *hh > 23 || *mm > 59 || *ss > 60 {
        return None;
    }
    // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, the inverse of
    // utc_stamp's).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400) + hh * 3600 + mm * 60 + ss) * 1000)
}

/// One flushed log file of a partition, as the filer lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushedFile {
    /// When its first record was stamped (ms, to the second), from its name.
    pub first_ms: Option<i64>,
    /// Its first and last offsets, when the broker wrote them down (not on a file that
    /// starts at offset 0).
    pub offset_min: Option<i64>,
    /// See `offset_min`.
    pub offset_max: Option<i64>,
    /// Its size in bytes.
    pub size: u64,
}

/// The partition's flushed log files, oldest first.
pub async fn flushed_files(
    client: &mut FilerClient,
    dir: &str,
) -> Result<Vec<FlushedFile>, String> {
    let mut files = filer::list(client, dir)
        .await
        .map_err(|e| format!("listing {dir}: {e}"))?;
    files.retain(|e| !e.is_directory && e.content.is_empty() && parse_stamp(&e.name).is_some());
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files
        .iter()
        .map(|f| FlushedFile {
            first_ms: parse_stamp(&f.name),
            offset_min: be_i64(f.extended.get("offset_min")),
            offset_max: be_i64(f.extended.get("offset_max")),
            size: f.attributes.as_ref().map_or(0, |a| a.file_size),
        })
        .collect())
}

/// Splits a log file into its entries; a torn tail is ignored.
pub fn parse_entries(buf: &[u8]) -> Result<Vec<LogEntry>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 4 <= buf.len() {
        let size =
            u32::from_be_bytes([buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]]) as usize;
        let Some(body) = buf.get(pos + 4..pos + 4 + size) else {
            break;
        };
        out.push(LogEntry::decode(body).map_err(|e| format!("log entry at byte {pos}: {e}"))?);
        pos += 4 + size;
    }
    Ok(out)
}

fn be_i64(v: Option<&bytes::Bytes>) -> Option<i64> {
    let b: [u8; 8] = v?.as_ref().try_into().ok()?;
    Some(i64::from_be_bytes(b))
}

/// GET over HTTP/1.0 (the server closes the connection after the body: no chunked coding).
async fn http_get(host_port: &str, path: &str) -> Result<Vec<u8>, String> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(host_port)
            .await
            .map_err(|e| format!("connecting to the filer at {host_port}: {e}"))?;
        let req = format!("GET {path} HTTP/1.0\r\nHost: {host_port}\r\nAccept: */*\r\n\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| format!("filer request: {e}"))?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)
            .await
            .map_err(|e| format!("filer response: {e}"))?;
        Ok::<_, String>(buf)
    };
    let buf = tokio::time::timeout(GET_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("filer GET {path} timed out"))??;
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("filer GET {path}: no HTTP header"))?;
    let status = String::from_utf8_lossy(&buf[..head_end.min(64)]).to_string();
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code != "200" {
        return Err(format!(
            "filer GET {path}: {}",
            status.lines().next().unwrap_or("")
        ));
    }
    Ok(buf[head_end + 4..].to_vec())
}

/// Reads flushed log files of partitions, keeping the last file parsed.
#[derive(Default)]
pub struct LogFiles {
    last: RefCell<Option<(String, u64, Entries)>>,
}

impl LogFiles {
    /// Entries with offsets in `[offset, end)`, in offset order, at most about `max_bytes`
    /// (always at least one when any exists).
    pub async fn read(
        &self,
        client: &mut FilerClient,
        http: &str,
        dir: &str,
        offset: i64,
        end: i64,
        max_bytes: usize,
    ) -> Result<Vec<LogEntry>, String> {
        let mut files = filer::list(client, dir)
            .await
            .map_err(|e| format!("listing {dir}: {e}"))?;
        files.retain(|e| {
            !e.is_directory
                && e.content.is_empty()
                && e.name != "checkpoint.offset"
                && !e.name.ends_with(".parquet")
        });
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out: Vec<LogEntry> = Vec::new();
        let mut bytes = 0usize;
        for f in files {
            let max = be_i64(f.extended.get("offset_max"));
            if max.is_some_and(|m| m < offset) {
                continue;
            }
            if be_i64(f.extended.get("offset_min")).is_some_and(|m| m >= end) {
                break;
            }
            let path = format!("{dir}/{}", f.name);
            let size = f.attributes.as_ref().map_or(0, |a| a.file_size);
            let entries = self.file(http, &path, size).await?;
            let mut next = out.last().map_or(offset, |e| e.offset + 1);
            for e in entries.iter() {
                if e.offset < next || e.offset >= end {
                    continue;
                }
                if !out.is_empty() && bytes + e.data.len() + e.key.len() > max_bytes {
                    return Ok(out);
                }
                bytes += e.data.len() + e.key.len();
                next = e.offset + 1;
                out.push(e.clone());
            }
            if next >= end {
                break;
            }
        }
        Ok(out)
    }

    async fn file(&self, http: &str, path: &str, size: u64) -> Result<Entries, String> {
        if let Some((p, s, e)) = self.last.borrow().as_ref() {
            if p == path && *s == size {
                return Ok(e.clone());
            }
        }
        let body = http_get(http, path).await?;
        let entries = Rc::new(parse_entries(&body)?);
        *self.last.borrow_mut() = Some((path.to_string(), size, entries.clone()));
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_directory_stamp() {
        // 2026-12-02T15:54:18.802247979Z, as SeaweedFS names it.
        assert_eq!(utc_stamp(1_796_226_858_802_247_979), "2026-12-02-15-54-18");
        assert_eq!(utc_stamp(0), "1970-01-01-00-00-00");
        assert_eq!(utc_stamp(951_782_400_000_000_000), "2000-02-29-00-00-00");
        for ns in [
            0,
            951_782_400_000_000_000,
            1_796_226_858_802_247_979,
            4_102_444_799_000_000_000,
        ] {
            assert_eq!(
                parse_stamp(&utc_stamp(ns)),
                Some(ns / 1_000_000_000 * 1000),
                "{ns}"
            );
        }
        for bad in [
            "checkpoint.offset",
            "2026-13-01-00-00-00",
            "2026-12-02-15-54",
            "x-1-1-1-1-1",
            "2026--12-02-15-54-18",
        ] {
            assert_eq!(parse_stamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn entries_of_a_log_file() {
        let mut buf = Vec::new();
        for i in 0..3 {
            let e = LogEntry {
                ts_ns: 10 + i,
                partition_key_hash: 0,
                data: vec![b'v'; i as usize].into(),
                key: bytes::Bytes::from_static(b"k"),
                offset: 5 + i,
            };
            let b = e.encode_to_vec();
            buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
            buf.extend_from_slice(&b);
        }
        buf.extend_from_slice(&[0, 0, 0, 99, 1]); // torn tail
        let got = parse_entries(&buf).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!((got[2].offset, got[2].data.len()), (7, 2));
    }
}
