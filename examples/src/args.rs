//! A small hand-written argument parser: `--flag`, `--name value` / `--name=value`, positionals,
//! and `--help`.

use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// The command line of an example, consumed option by option; [`Args::finish`] rejects
/// whatever is left.
#[derive(Debug)]
pub struct Args {
    program: String,
    rest: Vec<String>,
}

impl Args {
    /// The process's arguments. `--help` or `-h` anywhere prints `usage` and exits with 0.
    pub fn parse(usage: &str) -> Args {
        Args::from_vec(
            crate::program_name(),
            usage,
            std::env::args().skip(1).collect(),
        )
    }

    /// Arguments from a vector (for tests); `--help` exits as in [`Args::parse`].
    pub fn from_vec(program: String, usage: &str, rest: Vec<String>) -> Args {
        if rest.iter().any(|a| a == "--help" || a == "-h") {
            println!("{}", usage.trim_end());
            std::process::exit(0);
        }
        Args { program, rest }
    }

    /// Whether `--name` was given (and removes it).
    pub fn flag(&mut self, name: &str) -> bool {
        match self.rest.iter().position(|a| a == name) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    /// The value of `--name value` or `--name=value`, if given (and removes it).
    pub fn value(&mut self, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        let i = self
            .rest
            .iter()
            .position(|a| a == name || a.starts_with(&prefix))?;
        let arg = self.rest.remove(i);
        if let Some(v) = arg.strip_prefix(&prefix) {
            return Some(v.to_string());
        }
        if i >= self.rest.len() {
            self.usage_error(format!("{name} needs a value"));
        }
        Some(self.rest.remove(i))
    }

    /// The value of `--name`, parsed.
    pub fn parsed<T>(&mut self, name: &str) -> Option<T>
    where
        T: FromStr,
        T::Err: Display,
    {
        let v = self.value(name)?;
        match v.parse() {
            Ok(t) => Some(t),
            Err(e) => self.usage_error(format!("{name} {v}: {e}")),
        }
    }

    /// The value of `--name` as a duration (`500ms`, `3s`, `1.5s`, `2m`; a bare number is
    /// seconds).
    pub fn duration(&mut self, name: &str) -> Option<Duration> {
        let v = self.value(name)?;
        match parse_duration(&v) {
            Ok(d) => Some(d),
            Err(e) => self.usage_error(format!("{name} {v}: {e}")),
        }
    }

    /// The next positional argument (call it after taking the options).
    pub fn positional(&mut self) -> Option<String> {
        let i = self.rest.iter().position(|a| !a.starts_with("--"))?;
        Some(self.rest.remove(i))
    }

    /// All remaining positional arguments.
    pub fn positionals(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.positional()).collect()
    }

    /// Fails on anything not consumed (an unknown option, say).
    pub fn finish(self) {
        if let Some(a) = self.rest.first() {
            let what = if a.starts_with("--") {
                "unknown option"
            } else {
                "unexpected argument"
            };
            self.usage_error(format!("{what} `{a}`"));
        }
    }

    /// Prints a usage error and exits with status 2.
    pub fn usage_error(&self, message: impl Display) -> ! {
        eprintln!("{}: {message}", self.program);
        eprintln!("(run `{} --help` for usage)", self.program);
        std::process::exit(2)
    }
}

/// Parses `500ms`, `3s`, `1.5s`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let n: f64 = number
        .trim()
        .parse()
        .map_err(|_| "expected a duration such as 500ms, 3s or 2m".to_string())?;
    Duration::try_from_secs_f64(n * scale).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::from_vec("t".into(), "", v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn options_and_positionals() {
        let mut a = args(&["IOR:00", "--count", "3", "--quiet", "--timeout=2s", "hi"]);
        assert!(a.flag("--quiet"));
        assert!(!a.flag("--loud"));
        assert_eq!(a.parsed::<u32>("--count"), Some(3));
        assert_eq!(a.duration("--timeout"), Some(Duration::from_secs(2)));
        assert_eq!(a.positionals(), vec!["IOR:00", "hi"]);
        a.finish();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("4"), Ok(Duration::from_secs(4)));
        assert!(parse_duration("soon").is_err());
    }
}
