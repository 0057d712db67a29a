//! A panic anywhere ends the process.
//!
//! glommio catches nothing for us: a panicking task unwinds its executor's thread, and the
//! other shards keep serving (ApiVersions answered, produces to the dead core's partitions
//! hanging). A half-alive broker is worse than a dead one a supervisor restarts, so the
//! panic hook logs one clear line and aborts the whole process before any unwinding.

use std::panic::PanicHookInfo;

/// Installs the hook; call first thing in `main`, before any thread starts.
pub fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        let line = describe(info);
        // Both: the tracing subscriber may be what panicked, and stderr always works.
        tracing::error!("{line}");
        eprintln!("kelp: {line}");
        std::process::abort();
    }));
}

fn describe(info: &PanicHookInfo<'_>) -> String {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("unnamed");
    let msg = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic payload)".into());
    let at = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    format!(
        "panic in thread '{name}' at {at}: {msg}; aborting the process (a supervisor restarts it)"
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// Set in the child process this test starts: there the hook is installed and a shard-like
    /// executor task panics while another executor keeps running.
    const CHILD: &str = "KELP_PANIC_TEST_CHILD";

    #[test]
    fn a_panicking_task_aborts_the_whole_process() {
        if std::env::var_os(CHILD).is_some() {
            child();
        }
        let exe = std::env::current_exe().expect("test binary");
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "--exact",
            "server::panic::tests::a_panicking_task_aborts_the_whole_process",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("spawn child");
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("the process survived a panicking shard task for 30 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
            .expect("stderr");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGABRT),
            "status {status:?}, stderr {err}"
        );
        assert!(
            err.contains("panic in thread 'shard-under-test") && err.contains("boom in a task"),
            "stderr: {err}"
        );
    }

    fn child() -> ! {
        super::abort_on_panic();
        // A healthy executor that would keep the process alive forever.
        let _alive = glommio::LocalExecutorBuilder::default()
            .name("healthy")
            .spawn(|| async {
                loop {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
            })
            .expect("executor");
        let dying = glommio::LocalExecutorBuilder::default()
            .name("shard-under-test")
            .spawn(|| async {
                glommio::spawn_local(async {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                    panic!("boom in a task");
                })
                .detach();
                loop {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
            })
            .expect("executor");
        let _ = dying.join();
        // Only reached if the panic did not end the process.
        std::thread::sleep(Duration::from_secs(3600));
        std::process::exit(0);
    }
}
