//! The `--config` file: a TOML file of settings whose keys are the flags' long names
//! (`data-dir = "/var/lib/kelp"`), read at start-up and merged under the command line.
//!
//! Owns reading and checking the file and turning it into flag arguments. Nothing here knows
//! any particular flag: every key is looked up in clap's own [`Command`] for [`Config`], so a
//! flag added to `Config` is a file setting with no code here. Each key becomes `--key=value`
//! arguments placed before the command-line ones, and the whole is parsed with
//! `args_override_self`, so a flag given on the command line wins over the file's. Each key is
//! first parsed alone, so a bad value is reported at its own line. Calls only clap, toml and
//! [`super::print`] (for `--print-config`); reads the one file it is given.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};
use toml::{Spanned, Value};

use super::Config;

/// Flags that steer the loading itself, so they mean nothing inside a file.
const NOT_IN_FILE: [&str; 2] = ["config", "print-config"];

/// A problem with the `--config` file, located as precisely as the file allows.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Unreadable {
        /// The `--config` path.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{}:{line}: TOML syntax error: {message}", path.display())]
    Syntax {
        /// The `--config` path.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// One setting is wrong on its own: unknown, or a value its flag refuses.
    #[error("{}:{line}: key '{key}': {message}", path.display())]
    Key {
        /// The `--config` path.
        path: PathBuf,
        /// 1-based line of the key.
        line: usize,
        /// The key as written.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Settings that are each fine but not together (or with the command line), e.g. `listen`
    /// with `listeners`; `at` names the first file key involved, when one is.
    #[error("{}{}: {message}", path.display(), located(at))]
    Combined {
        /// The `--config` path.
        path: PathBuf,
        /// Line and key of a file setting named in the problem.
        at: Option<(usize, String)>,
        /// clap's reason.
        message: String,
    },
}

/// Why [`load`] gave no configuration.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The command line itself is wrong, or asks for help or the version: clap's own error,
    /// which prints and exits as a flag-only `kelp` does (`clap::Error::exit`).
    #[error(transparent)]
    Usage(#[from] clap::Error),
    /// The `--config` file is wrong; every problem found, in file order.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    File(Vec<FileError>),
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Loaded {
    /// Run the broker with this configuration.
    Run(Box<Config>),
    /// `--print-config`: print this text (a `--config` file of the effective settings) and
    /// exit.
    Print(String),
}

/// A `--config` file's settings as flag arguments.
#[derive(Debug, Default)]
pub struct FileArgs {
    /// The settings, in file order.
    pub settings: Vec<FileSetting>,
}

/// One setting of a `--config` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSetting {
    /// The clap id of its flag.
    pub id: String,
    /// The key as written.
    pub key: String,
    /// 1-based line of the key.
    pub line: usize,
    /// The `--key=value` (or bare `--flag`) arguments it stands for; none for a switch set
    /// to false.
    pub args: Vec<String>,
}

impl FileArgs {
    /// The setting of the flag with this clap id, if the file gives it.
    pub fn get(&self, id: &str) -> Option<&FileSetting> {
        self.settings.iter().find(|s| s.id == id)
    }

    /// Every setting's arguments, in file order.
    pub fn args(&self) -> impl Iterator<Item = &String> {
        self.settings.iter().flat_map(|s| &s.args)
    }
}

/// The `Config` command as the loader parses it: a later occurrence of a flag replaces an
/// earlier one, which is how the command line overrides the file.
pub fn command() -> Command {
    let mut cmd = Config::command().args_override_self(true);
    // Built, so the generated --help and --version are in its argument list too (a file
    // naming them is told they are not settings).
    cmd.build();
    cmd
}

/// Parses the process arguments (`args[0]` the program) and the `--config` file they name, if
/// any, into what `kelp` should do.
pub fn load<I, T>(args: I) -> Result<Loaded, LoadError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cmd = command();
    let cli: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli_matches = cmd.clone().try_get_matches_from(&cli)?;
    let path = cli_matches.get_one::<PathBuf>("config").cloned();
    let file = match &path {
        Some(path) => read(&cmd, path).map_err(LoadError::File)?,
        None => FileArgs::default(),
    };
    let program = cli.first().cloned().unwrap_or_else(|| "kelp".into());
    // A setting the command line gives too is left out of the file's arguments:
    // args_override_self lets a later value replace an earlier one, but a list flag
    // (ArgAction::Append) would add the command line's items to the file's.
    let combined: Vec<OsString> = std::iter::once(program)
        .chain(
            file.settings
                .iter()
                .filter(|s| !on_command_line(&cli_matches, &s.id))
                .flat_map(|s| s.args.iter().map(OsString::from)),
        )
        .chain(cli.iter().skip(1).cloned())
        .collect();
    let matches = match (cmd.clone().try_get_matches_from(&combined), &path) {
        (Ok(m), _) => m,
        (Err(e), Some(path)) => return Err(LoadError::File(vec![combined_error(path, &file, &e)])),
        (Err(e), None) => return Err(e.into()),
    };
    if cli_matches.get_flag("print_config") {
        return Ok(Loaded::Print(super::print::render(
            &cmd,
            &matches,
            &cli_matches,
            &file,
            path.as_deref(),
        )));
    }
    Ok(Loaded::Run(Box::new(Config::from_arg_matches(&matches)?)))
}

/// Reads and checks the file at `path` (see [`file_args`]).
pub fn read(cmd: &Command, path: &Path) -> Result<FileArgs, Vec<FileError>> {
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![FileError::Unreadable {
            path: path.to_path_buf(),
            source,
        }]
    })?;
    file_args(cmd, path, &text)
}

/// Turns the TOML `text` (of the file `path`, for messages) into flag arguments of `cmd`,
/// checking each key alone against its flag; every problem found is returned.
pub fn file_args(cmd: &Command, path: &Path, text: &str) -> Result<FileArgs, Vec<FileError>> {
    let table: BTreeMap<Spanned<String>, Spanned<Value>> = toml::from_str(text).map_err(|e| {
        vec![FileError::Syntax {
            path: path.to_path_buf(),
            line: line_of(text, e.span().map_or(0, |s| s.start)),
            message: e.message().trim().to_string(),
        }]
    })?;
    let mut entries: Vec<_> = table.into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut out = FileArgs::default();
    let mut errors = Vec::new();
    for (key, value) in entries {
        let line = line_of(text, key.span().start);
        let key = key.into_inner();
        match key_args(cmd, &key, value.get_ref()) {
            Ok((id, args)) => out.settings.push(FileSetting {
                id,
                key,
                line,
                args,
            }),
            Err(message) => errors.push(FileError::Key {
                path: path.to_path_buf(),
                line,
                key,
                message,
            }),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The arguments one file setting stands for, checked by parsing them alone, with its flag's
/// clap id; or what is wrong with it.
fn key_args(cmd: &Command, key: &str, value: &Value) -> Result<(String, Vec<String>), String> {
    if let Value::Table(_) = value {
        // Checked first: a `[section]` header is a table, whatever its name.
        return Err(value_text(value).err().unwrap_or_default());
    }
    if NOT_IN_FILE.contains(&key) {
        return Err(format!(
            "--{key} is a command-line flag, not a file setting"
        ));
    }
    let Some(arg) = find_arg(cmd, key) else {
        return Err(unknown_key(cmd, key));
    };
    let args = flag_args(arg, key, value)?;
    let parsed = cmd
        .clone()
        .try_get_matches_from(std::iter::once("kelp".to_string()).chain(args.iter().cloned()));
    match parsed {
        Ok(_) => Ok((arg.get_id().to_string(), args)),
        Err(e) => Err(match e.kind() {
            ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
                let bad = e.get(ContextKind::InvalidValue).map_or_else(
                    || scalar_text(value).unwrap_or_default(),
                    ToString::to_string,
                );
                format!("bad value '{bad}': {}", clap_reason(&e))
            }
            _ => clap_reason(&e),
        }),
    }
}

/// The argument whose long name (or a visible alias of it) is `key`.
fn find_arg<'c>(cmd: &'c Command, key: &str) -> Option<&'c Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long_and_visible_aliases()
            .is_some_and(|names| names.contains(&key))
    })
}

/// The message for a key no flag has, with clap's suggestion of a near one.
fn unknown_key(cmd: &Command, key: &str) -> String {
    let suggestion = cmd
        .clone()
        .try_get_matches_from(["kelp".to_string(), format!("--{key}")])
        .err()
        .and_then(|e| match e.get(ContextKind::SuggestedArg) {
            Some(ContextValue::String(s)) => Some(s.trim_start_matches('-').to_string()),
            _ => None,
        })
        .filter(|s| !NOT_IN_FILE.contains(&s.as_str()));
    match suggestion {
        Some(s) => format!("unknown setting (did you mean '{s}'?)"),
        None => "unknown setting (the settings are the long flags of `kelp --help`, without \
                 the leading --)"
            .to_string(),
    }
}

/// The command-line arguments a file setting stands for, by what its flag does.
fn flag_args(arg: &Arg, key: &str, value: &Value) -> Result<Vec<String>, String> {
    match arg.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => match value {
            Value::Boolean(true) => Ok(vec![format!("--{key}")]),
            Value::Boolean(false) => Ok(Vec::new()),
            other => Err(format!(
                "bad value {}: a switch takes true or false",
                short_toml(other)
            )),
        },
        ArgAction::Set | ArgAction::Append => Ok(vec![format!("--{key}={}", value_text(value)?)]),
        _ => Err(format!("--{key} is not a setting")),
    }
}

/// The text of a setting's value as its flag would take it: a scalar's text, an array's
/// items joined with commas (the list flags' syntax).
pub fn value_text(value: &Value) -> Result<String, String> {
    if let Some(s) = scalar_text(value) {
        return Ok(s);
    }
    match value {
        Value::Array(items) => items
            .iter()
            .map(|i| {
                scalar_text(i).ok_or_else(|| {
                    format!(
                        "an array may hold only strings, numbers and booleans, not a {}",
                        i.type_str()
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|items| items.join(",")),
        Value::Table(_) => Err(
            "a table is not a setting value (settings are top-level keys, \
                                the flags' long names without --)"
                .to_string(),
        ),
        other => Err(format!(
            "a {} is not a setting value (quote it as a string)",
            other.type_str()
        )),
    }
}

/// A string, number or boolean as text; `None` for anything else.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A value as TOML, cut short, for a message.
fn short_toml(value: &Value) -> String {
    let s = value.to_string();
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// The reason in a clap error, without its "error:" preamble and usage lines: the value
/// parser's own message when there is one.
fn clap_reason(e: &clap::Error) -> String {
    if let Some(source) = std::error::Error::source(e) {
        return source.to_string();
    }
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        return format!("possible values: {}", valid.join(", "));
    }
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// The error of the parse of file and command line together, located at the first file
/// setting it names.
fn combined_error(path: &Path, file: &FileArgs, e: &clap::Error) -> FileError {
    let mut named = Vec::new();
    for kind in [ContextKind::InvalidArg, ContextKind::PriorArg] {
        match e.get(kind) {
            Some(ContextValue::String(s)) => named.push(s.clone()),
            Some(ContextValue::Strings(v)) => named.extend(v.iter().cloned()),
            _ => {}
        }
    }
    // clap names an argument as "--long <VALUE>".
    let at = named
        .iter()
        .filter_map(|n| n.split_whitespace().next()?.strip_prefix("--"))
        .filter_map(|long| file.settings.iter().find(|s| s.key == long))
        .map(|s| (s.line, s.key.clone()))
        .min();
    FileError::Combined {
        path: path.to_path_buf(),
        at,
        message: clap_reason(e),
    }
}

/// The `:LINE: key 'K'` part of a [`FileError::Combined`] message.
fn located(at: &Option<(usize, String)>) -> String {
    at.as_ref()
        .map(|(line, key)| format!(":{line}: key '{key}'"))
        .unwrap_or_default()
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Whether the command-line parse `cli` set this argument (rather than the file or a
/// default).
pub(super) fn on_command_line(cli: &ArgMatches, id: &str) -> bool {
    cli.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
