//! `kelp --print-config`: the effective configuration written as a `--config` file.
//!
//! Owns the rendering only: every flag of the clap [`Command`] in definition order, as the
//! TOML [`super::file`] reads back (a round trip gives the same configuration), each with
//! where its value came from (`# default`, `# file`, `# command line`), unset optional ones
//! as commented lines, secret values masked. Calls only clap, toml and [`super::file`].

use std::fmt::Write as _;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use toml::Value;

use super::file::{on_command_line, FileArgs};

/// Flags that steer the loading itself, left out of the printout.
const LOADER_FLAGS: [&str; 2] = ["config", "print-config"];

/// Words that make a flag's value a secret (a password, a token), unless the flag names a file
/// holding it: a path is not a secret.
const SECRET_WORDS: [&str; 5] = ["password", "secret", "token", "credential", "credentials"];

/// Where the value of a path-like flag is, so it is shown even if a secret word is in its name.
const PATH_WORDS: [&str; 3] = ["file", "dir", "path"];

/// Comments start in this column at most (long values push theirs further).
const COMMENT_COLUMN: usize = 56;

/// Whether the flag `long` holds a secret value, which is printed masked.
pub fn is_secret(long: &str) -> bool {
    let words: Vec<&str> = long.split('-').collect();
    words.iter().any(|w| SECRET_WORDS.contains(w))
        && !words.last().is_some_and(|w| PATH_WORDS.contains(w))
}

/// The effective configuration `matches` (file and command line parsed together) as a
/// `--config` file; `cli` is the parse of the command line alone and `file` what the file at
/// `path` gave, which tell each value's source.
pub fn render(
    cmd: &Command,
    matches: &ArgMatches,
    cli: &ArgMatches,
    file: &FileArgs,
    path: Option<&Path>,
) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if LOADER_FLAGS.contains(&long) || !is_setting(arg) {
            continue;
        }
        let id = arg.get_id().as_str();
        let source = if on_command_line(cli, id) {
            "command line"
        } else if file.get(id).is_some() {
            "file"
        } else {
            match matches.value_source(id) {
                Some(ValueSource::DefaultValue) => "default",
                Some(ValueSource::EnvVariable) => "environment",
                Some(_) => "command line",
                None => {
                    lines.push((format!("# {long} =   (unset)"), String::new()));
                    continue;
                }
            }
        };
        let raw: Vec<String> = matches
            .get_raw(id)
            .map(|vals| vals.map(|v| v.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if is_secret(long) {
            lines.push((
                format!("# {long} = \"********\""),
                format!("# {source}; secret, not printed"),
            ));
            continue;
        }
        // A default that a given setting excludes (listen's, with listeners) is not in
        // effect, and written as a setting it would make the file refused.
        if source == "default" {
            if let Some(other) = excluded_by(cmd, arg, matches) {
                lines.push((
                    format!("# {long} = {}", scalar_toml(raw.join(",").as_str())),
                    format!("# default; not used with {other}"),
                ));
                continue;
            }
        }
        let value = match raw.as_slice() {
            // A switch that sets false when given is given when its value is false.
            [one] if matches!(arg.get_action(), ArgAction::SetFalse) => {
                Value::Boolean(one == "false")
            }
            [one] => scalar_toml(one),
            many => Value::Array(many.iter().map(|s| Value::String(s.clone())).collect()),
        };
        lines.push((format!("{long} = {value}"), format!("# {source}")));
    }
    let width = lines
        .iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(s, _)| s.chars().count())
        .filter(|&w| w < COMMENT_COLUMN)
        .max()
        .unwrap_or(0);
    let mut out = String::from(
        "# Kelp's effective configuration (kelp --print-config): a file for kelp --config.\n",
    );
    if let Some(path) = path {
        let _ = writeln!(out, "# Read from {} and the command line.", path.display());
    }
    for (setting, comment) in lines {
        if comment.is_empty() {
            let _ = writeln!(out, "{setting}");
        } else {
            let _ = writeln!(out, "{setting:width$}  {comment}");
        }
    }
    out
}

/// The long name of a setting given in `matches` (from the file or the command line) that
/// cannot be used with `arg`, either way round.
fn excluded_by<'c>(cmd: &'c Command, arg: &Arg, matches: &ArgMatches) -> Option<&'c str> {
    let excludes = |a: &Arg, b: &Arg| {
        cmd.get_arg_conflicts_with(a)
            .iter()
            .any(|c| c.get_id() == b.get_id())
    };
    cmd.get_arguments()
        .filter(|other| other.get_id() != arg.get_id())
        .filter(|other| {
            matches.value_source(other.get_id().as_str()) == Some(ValueSource::CommandLine)
        })
        .find(|other| excludes(arg, other) || excludes(other, arg))
        .and_then(Arg::get_long)
}

/// Whether the argument is a setting (a value or a switch), not --help or --version.
fn is_setting(arg: &Arg) -> bool {
    matches!(
        arg.get_action(),
        ArgAction::Set | ArgAction::Append | ArgAction::SetTrue | ArgAction::SetFalse
    )
}

/// A flag's value text as the TOML value that gives the same text back: booleans and
/// integers bare (only when they print as the same text, so "007" stays a string), anything
/// else a string.
fn scalar_toml(text: &str) -> Value {
    match text {
        "true" => Value::Boolean(true),
        "false" => Value::Boolean(false),
        _ => match text.parse::<i64>() {
            Ok(i) if i.to_string() == text => Value::Integer(i),
            _ => Value::String(text.to_string()),
        },
    }
}
