//! Command-line options: `--flag VALUE` and `--switch`, each at most once, and positional
//! arguments, checked against what the command takes so that every mistake is a usage error
//! that names it.

use std::collections::BTreeMap;

/// The parsed arguments of one command.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<&'static str, String>,
    switches: Vec<&'static str>,
    /// The positional arguments, in order.
    pub positional: Vec<String>,
}

/// What a command takes.
pub struct Spec {
    /// The command, for messages.
    pub command: &'static str,
    /// Flags that take a value (`--store URL`).
    pub values: &'static [&'static str],
    /// Flags without a value (`--json`).
    pub switches: &'static [&'static str],
    /// How many positional arguments at most.
    pub max_positional: usize,
}

impl Args {
    /// Parses `args` (after the command) against `spec`.
    pub fn parse(args: &[String], spec: &Spec) -> Result<Args, String> {
        let mut parsed = Args::default();
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            if let Some(flag) = spec.values.iter().find(|f| **f == arg) {
                let Some(value) = iter.next() else {
                    return Err(format!("{} {flag} needs a value", spec.command));
                };
                if parsed.values.insert(flag, value.clone()).is_some() {
                    return Err(format!("{} {flag} is given twice", spec.command));
                }
            } else if let Some(switch) = spec.switches.iter().find(|f| **f == arg) {
                if parsed.switches.contains(switch) {
                    return Err(format!("{} {switch} is given twice", spec.command));
                }
                parsed.switches.push(switch);
            } else if arg.starts_with('-') && arg.len() > 1 {
                return Err(format!("{} does not take {arg:?}", spec.command));
            } else if parsed.positional.len() < spec.max_positional {
                parsed.positional.push(arg.clone());
            } else {
                return Err(format!(
                    "{} does not take the argument {arg:?}",
                    spec.command
                ));
            }
        }
        Ok(parsed)
    }

    /// The value of `flag`, when given.
    pub fn value(&self, flag: &str) -> Option<&str> {
        self.values.get(flag).map(String::as_str)
    }

    /// Whether `switch` was given.
    pub fn has(&self, switch: &str) -> bool {
        self.switches.contains(&switch)
    }

    /// A numeric value of `flag`, when given.
    pub fn number(&self, flag: &str) -> Result<Option<u64>, String> {
        self.value(flag)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("{flag} takes a whole number, not {v:?}"))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: Spec = Spec {
        command: "show",
        values: &["--store"],
        switches: &["--json"],
        max_positional: 1,
    };

    fn parse(args: &[&str]) -> Result<Args, String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        Args::parse(&args, &SPEC)
    }

    #[test]
    fn flags_switches_and_positionals() {
        let args = parse(&["t-1", "--json", "--store", "sqlite:x"]).unwrap();
        assert_eq!(args.positional, ["t-1"]);
        assert!(args.has("--json"));
        assert_eq!(args.value("--store"), Some("sqlite:x"));
    }

    #[test]
    fn every_mistake_is_named() {
        assert_eq!(
            parse(&["--store"]).unwrap_err(),
            "show --store needs a value"
        );
        assert_eq!(
            parse(&["--store", "a", "--store", "b"]).unwrap_err(),
            "show --store is given twice"
        );
        assert_eq!(
            parse(&["--json", "--json"]).unwrap_err(),
            "show --json is given twice"
        );
        assert_eq!(
            parse(&["--yaml"]).unwrap_err(),
            "show does not take \"--yaml\""
        );
        assert_eq!(
            parse(&["a", "b"]).unwrap_err(),
            "show does not take the argument \"b\""
        );
    }
}
