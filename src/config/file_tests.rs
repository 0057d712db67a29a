use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::config::{CoreList, FsyncPolicy};

/// A file of this test process with `text` in it (removed on drop).
struct TempFile(PathBuf);

impl TempFile {
    fn new(text: &str) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kelp-config-test-{}-{}.toml",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    fn arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn args_of(text: &str) -> Result<FileArgs, Vec<FileError>> {
    file_args(&command(), Path::new("/etc/kelp/kelp.toml"), text)
}

/// The one error of a file that has one, as kelp prints it.
fn error_of(text: &str) -> String {
    let errors = args_of(text).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    errors[0].to_string()
}

fn run(args: &[&str]) -> Config {
    match load(std::iter::once("kelp").chain(args.iter().copied())) {
        Ok(Loaded::Run(c)) => *c,
        other => panic!("expected a configuration, got {other:?}"),
    }
}

fn printed(args: &[&str]) -> String {
    match load(std::iter::once("kelp").chain(args.iter().copied())) {
        Ok(Loaded::Print(text)) => text,
        other => panic!("expected a printout, got {other:?}"),
    }
}

fn file_errors(args: &[&str]) -> Vec<String> {
    match load(std::iter::once("kelp").chain(args.iter().copied())) {
        Err(LoadError::File(errors)) => errors.iter().map(ToString::to_string).collect(),
        other => panic!("expected file errors, got {other:?}"),
    }
}

#[test]
fn keys_become_flag_arguments_in_file_order() {
    let f = args_of(
        "listen = \"0.0.0.0:9092\"\n\
         data-dir = \"/var/lib/kelp\"\n\
         cache-bytes-per-core = 536870912\n\
         advertise-shards = true\n\
         cores = \"0-3\"\n\
         metrics-addr = \"127.0.0.1:9644\"\n",
    )
    .unwrap();
    assert_eq!(
        f.args().collect::<Vec<_>>(),
        [
            "--listen=0.0.0.0:9092",
            "--data-dir=/var/lib/kelp",
            "--cache-bytes-per-core=536870912",
            "--advertise-shards",
            "--cores=0-3",
            "--metrics-addr=127.0.0.1:9644",
        ]
    );
    assert_eq!(
        f.get("cache_bytes_per_core"),
        Some(&FileSetting {
            id: "cache_bytes_per_core".into(),
            key: "cache-bytes-per-core".into(),
            line: 3,
            args: vec!["--cache-bytes-per-core=536870912".into()],
        })
    );
}

#[test]
fn unknown_key_names_line_and_suggests() {
    assert_eq!(
        error_of("listen = \"127.0.0.1:9092\"\n\n# memory\ncache-bytes-per-cor = 1\n"),
        "/etc/kelp/kelp.toml:4: key 'cache-bytes-per-cor': unknown setting \
         (did you mean 'cache-bytes-per-core'?)"
    );
    let far = error_of("zzzz = 1\n");
    assert!(
        far.starts_with("/etc/kelp/kelp.toml:1: key 'zzzz': unknown setting ("),
        "{far}"
    );
    assert!(!far.contains("did you mean"), "{far}");
}

#[test]
fn bad_value_names_line_and_clap_reason() {
    let e = error_of("listen = \"127.0.0.1:9092\"\nfsync = \"sometimes\"\n");
    assert_eq!(
        e,
        "/etc/kelp/kelp.toml:2: key 'fsync': bad value 'sometimes': bad fsync policy \
         'sometimes': use always, never or interval:MS (MS > 0)"
    );
    let e = error_of("storage = \"tape\"\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:1: key 'storage': bad value 'tape': "),
        "{e}"
    );
    assert!(e.contains("local"), "possible values listed: {e}");
    let e = error_of("\nio-threads-per-core = 65\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:2: key 'io-threads-per-core': bad value '65': "),
        "{e}"
    );
    let e = error_of("ring-depth = -1\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:1: key 'ring-depth': bad value '-1': "),
        "{e}"
    );
}

#[test]
fn every_bad_key_is_reported() {
    let errors = args_of("fsync = \"x\"\nlisten = \"127.0.0.1:1\"\nnope = 1\n").unwrap_err();
    let lines: Vec<_> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("/etc/kelp/kelp.toml:1: key 'fsync'"));
    assert!(lines[1].starts_with("/etc/kelp/kelp.toml:3: key 'nope'"));
}

#[test]
fn arrays_become_comma_lists() {
    let f = args_of(
        "cores = [0, 2, \"4-5\"]\nsasl-enabled-mechanisms = [\"PLAIN\", \"SCRAM-SHA-512\"]\n",
    )
    .unwrap();
    assert_eq!(
        f.args().collect::<Vec<_>>(),
        [
            "--cores=0,2,4-5",
            "--sasl-enabled-mechanisms=PLAIN,SCRAM-SHA-512"
        ]
    );
    let cfg = TempFile::new(
        "cores = [0, 1]\nsasl-enabled-mechanisms = [\"PLAIN\"]\n\
         sasl-oauthbearer-expected-audience = [\"a\", \"b\"]\n",
    );
    let c = run(&["--config", &cfg.arg()]);
    assert_eq!(c.cores, Some(CoreList(vec![0, 1])));
    assert_eq!(c.sasl_enabled_mechanisms.0, ["PLAIN"]);
    assert_eq!(c.oauth.sasl_oauthbearer_expected_audience, ["a", "b"]);
    let e = error_of("cores = [[0], [1]]\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:1: key 'cores': an array may hold only"),
        "{e}"
    );
}

#[test]
fn tables_and_dates_are_not_values() {
    let e = error_of("[server]\nlisten = \"127.0.0.1:1\"\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:1: key 'server': a table is not"),
        "{e}"
    );
    let e = error_of("\nlisten.port = 1\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:2: key 'listen': a table is not"),
        "{e}"
    );
    let e = error_of("data-dir = 1979-05-27\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:1: key 'data-dir': a datetime is not"),
        "{e}"
    );
}

#[test]
fn switches_take_booleans() {
    assert_eq!(
        args_of("advertise-shards = true\n")
            .unwrap()
            .args()
            .collect::<Vec<_>>(),
        ["--advertise-shards"]
    );
    let off = args_of("advertise-shards = false\n").unwrap();
    assert_eq!(off.args().count(), 0);
    assert!(
        off.get("advertise_shards").is_some(),
        "a false switch is still the file's"
    );
    let e = error_of("advertise-shards = \"yes\"\n");
    assert_eq!(
        e,
        "/etc/kelp/kelp.toml:1: key 'advertise-shards': bad value \"yes\": a switch takes true \
         or false"
    );
    // A flag with a bool value (not a switch) takes the boolean as text.
    let cfg = TempFile::new("auto-create-topics = false\nallow-everyone-if-no-acl-found = true\n");
    let c = run(&["--config", &cfg.arg()]);
    assert!(!c.auto_create_topics);
    assert!(c.allow_everyone_if_no_acl_found);
}

#[test]
fn loader_flags_and_help_are_not_settings() {
    for key in ["config", "print-config"] {
        let e = error_of(&format!("{key} = \"x\"\n"));
        assert!(
            e.contains("is a command-line flag, not a file setting"),
            "{e}"
        );
    }
    let e = error_of("help = true\n");
    assert!(e.contains("--help is not a setting"), "{e}");
}

#[test]
fn syntax_error_names_its_line() {
    let e = error_of("listen = \"127.0.0.1:9092\"\ndata-dir = \n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:2: TOML syntax error: "),
        "{e}"
    );
    let e = error_of("listen = \"127.0.0.1:9092\"\n\nlisten = \"127.0.0.1:9093\"\n");
    assert!(
        e.starts_with("/etc/kelp/kelp.toml:3: TOML syntax error: "),
        "duplicate key: {e}"
    );
}

#[test]
fn command_line_beats_file() {
    let cfg = TempFile::new(
        "listen = \"127.0.0.1:9000\"\nfsync = \"never\"\ndata-dir = \"/tmp/from-file\"\n\
         sasl-oauthbearer-expected-audience = [\"file\"]\n",
    );
    // Before and after --config on the command line: the command line wins either way.
    for args in [
        vec!["--listen", "127.0.0.1:9001", "--config", &cfg.arg()],
        vec!["--config", &cfg.arg(), "--listen=127.0.0.1:9001"],
    ] {
        let mut args = args;
        args.extend(["--sasl-oauthbearer-expected-audience", "cli1,cli2"]);
        let c = run(&args);
        assert_eq!(c.listen.port(), 9001);
        assert_eq!(c.fsync, FsyncPolicy::Never);
        assert_eq!(c.data_dir, PathBuf::from("/tmp/from-file"));
        assert_eq!(c.oauth.sasl_oauthbearer_expected_audience, ["cli1", "cli2"]);
    }
    let c = run(&["--config", &cfg.arg()]);
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.oauth.sasl_oauthbearer_expected_audience, ["file"]);
}

#[test]
fn conflicts_name_the_file() {
    let cfg = TempFile::new("fsync = \"never\"\nlisten = \"127.0.0.1:9000\"\n");
    let errors = file_errors(&["--config", &cfg.arg(), "--listeners", "PLAINTEXT://:9092"]);
    assert_eq!(errors.len(), 1);
    let want = format!("{}:2: key 'listen': ", cfg.arg());
    assert!(errors[0].starts_with(&want), "{errors:?}");
    assert!(errors[0].contains("cannot be used with"), "{errors:?}");
}

#[test]
fn missing_file_names_the_path() {
    let errors = file_errors(&["--config", "/nonexistent/kelp.toml"]);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("cannot read config file /nonexistent/kelp.toml: "),
        "{errors:?}"
    );
}

#[test]
fn command_line_errors_stay_clap_usage_errors() {
    let r = load(["kelp", "--no-such-flag"]);
    assert!(matches!(r, Err(LoadError::Usage(e)) if e.kind() == ErrorKind::UnknownArgument));
}

/// The configuration with the loader's own flags cleared, to compare what the broker sees.
fn effective(mut c: Config) -> String {
    c.config = None;
    c.print_config = false;
    format!("{c:?}")
}

#[test]
fn print_config_round_trips() {
    let cfg = TempFile::new(
        "listen = \"127.0.0.1:19092\"\ncores = [0, 1]\nadvertise-shards = true\n\
         fsync = \"interval:50\"\nsuper-users = \"User:a;User:b\"\n\
         sasl-oauthbearer-expected-audience = [\"x\", \"y\"]\nauto-create-topics = false\n",
    );
    let cli = [
        "--config",
        &cfg.arg(),
        "--data-dir",
        "/tmp/kelp \"quoted\"",
        "--cluster-id=007",
    ];
    let text = printed(&[&cli[..], &["--print-config"]].concat());
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} =")) || l.starts_with(&format!("# {key} =")))
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
            .to_string()
    };
    assert!(line("listen").ends_with("# file"), "{text}");
    assert!(line("data-dir").ends_with("# command line"), "{text}");
    assert!(
        line("segment-bytes").starts_with("segment-bytes = 1073741824 "),
        "{text}"
    );
    assert!(line("segment-bytes").ends_with("# default"), "{text}");
    assert!(
        line("cluster-id").starts_with("cluster-id = \"007\""),
        "{text}"
    );
    assert!(
        line("advertise-shards").starts_with("advertise-shards = true"),
        "{text}"
    );
    assert_eq!(line("seaweedmq-master"), "# seaweedmq-master =   (unset)");
    assert!(!text.contains("print-config ="), "{text}");
    // Every setting is there.
    let settings = command()
        .get_arguments()
        .filter(|a| !matches!(a.get_action(), ArgAction::Help | ArgAction::Version))
        .count();
    let listed = text
        .lines()
        .filter(|l| !l.starts_with("# ") || l.ends_with("(unset)"))
        .count();
    assert_eq!(listed, settings - 2, "{text}");

    let back = TempFile::new(&text);
    let reread = run(&["--config", &back.arg()]);
    assert_eq!(effective(reread), effective(run(&cli)));
    // And printing it again gives the same settings, now all from the file or defaults.
    let again = printed(&["--config", &back.arg(), "--print-config"]);
    assert!(!again.contains("# command line"), "{again}");
}

#[test]
fn print_config_without_file() {
    let text = printed(&["--print-config", "--listen", "127.0.0.1:1"]);
    assert!(text.contains("listen = \"127.0.0.1:1\""), "{text}");
    assert!(!text.contains("# file"), "{text}");
    let back = TempFile::new(&text);
    assert_eq!(
        effective(run(&["--config", &back.arg()])),
        effective(run(&["--listen", "127.0.0.1:1"]))
    );
}

#[test]
fn print_config_leaves_out_excluded_defaults() {
    let cfg = TempFile::new(
        "listeners = \"PLAINTEXT://127.0.0.1:9092,INT://127.0.0.1:9093\"\n\
         listener-security-protocol-map = \"INT:PLAINTEXT\"\n",
    );
    let text = printed(&["--config", &cfg.arg(), "--print-config"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("# listen = \"0.0.0.0:9092\"")
                && l.ends_with("# default; not used with listeners")),
        "{text}"
    );
    assert!(
        text.contains("# security-protocol = \"PLAINTEXT\""),
        "{text}"
    );
    let back = TempFile::new(&text);
    assert_eq!(
        effective(run(&["--config", &back.arg()])),
        effective(run(&["--config", &cfg.arg()]))
    );
}

#[test]
fn secrets_are_masked() {
    assert!(super::super::print::is_secret("sasl-admin-password"));
    assert!(super::super::print::is_secret("oauth-client-secret"));
    assert!(!super::super::print::is_secret("sasl-password-file"));
    assert!(!super::super::print::is_secret(
        "sasl-oauthbearer-jwks-file"
    ));
    assert!(!super::super::print::is_secret("sasl-bootstrap-users"));
    // No flag of kelp's holds a secret today; a command that has one shows it masked.
    let mut cmd = Command::new("t")
        .arg(Arg::new("db_password").long("db-password"))
        .arg(Arg::new("db_host").long("db-host"))
        .args_override_self(true);
    cmd.build();
    let path = Path::new("/etc/t.toml");
    let file = file_args(&cmd, path, "db-password = \"hunter2\"\n").unwrap();
    let matches = cmd
        .clone()
        .try_get_matches_from(["t".to_string()].into_iter().chain(file.args().cloned()))
        .unwrap();
    let cli = cmd.clone().try_get_matches_from(["t"]).unwrap();
    let text = super::super::print::render(&cmd, &matches, &cli, &file, Some(path));
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("# db-password = \"********\"  # file; secret, not printed"),
        "{text}"
    );
    assert!(text.contains("# db-host =   (unset)"), "{text}");
}
