//! Process-wide gauges: `kelp_build_info`, `kelp_start_time_seconds`, and the file system
//! under `--data-dir` (`kelp_data_dir_free_bytes`, `kelp_data_dir_size_bytes`), read with
//! statvfs at scrape on the metrics thread. Calls `log::usage` for the statvfs.

use std::fmt::Write;
use std::path::Path;

use super::render::header;

/// Renders the build, start time and data directory gauges.
pub fn render(out: &mut String, start_time_s: f64, data_dir: Option<&Path>) {
    header(
        out,
        "kelp_build_info",
        "gauge",
        "Always 1; the version label names the running build.",
    );
    let _ = writeln!(
        out,
        "kelp_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    header(
        out,
        "kelp_start_time_seconds",
        "gauge",
        "When the process started, in seconds since the Unix epoch.",
    );
    let _ = writeln!(out, "kelp_start_time_seconds {start_time_s}");
    let Some((size, free)) = data_dir.and_then(crate::log::usage::file_system) else {
        return;
    };
    for (name, help, v) in [
        (
            "kelp_data_dir_free_bytes",
            "Bytes free for Kelp (an unprivileged writer) on the file system of --data-dir.",
            free,
        ),
        (
            "kelp_data_dir_size_bytes",
            "Size of the file system of --data-dir, in bytes.",
            size,
        ),
    ] {
        header(out, name, "gauge", help);
        let _ = writeln!(out, "{name} {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_dirs_file_system_is_reported() {
        let mut out = String::new();
        render(&mut out, 1.5, Some(Path::new("/")));
        assert!(out.contains("kelp_start_time_seconds 1.5\n"));
        assert!(out.contains(&format!(
            "kelp_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )));
        let value = |name: &str| -> i64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .expect(name);
            line.split(' ')
                .nth(1)
                .and_then(|v| v.parse().ok())
                .expect("a number")
        };
        let (free, size) = (
            value("kelp_data_dir_free_bytes"),
            value("kelp_data_dir_size_bytes"),
        );
        assert!(
            size > 0 && free >= 0 && free <= size,
            "free {free} size {size}"
        );
        let mut missing = String::new();
        render(&mut missing, 1.5, Some(Path::new("/no/such/dir/at/all")));
        assert!(!missing.contains("kelp_data_dir"));
    }
}
