//! Typed environment variables whose errors name the variable.

use super::text::truncate;
use crate::error::BadInput;

/// Reads an environment variable through `lookup` (so tests and containers can pass their own
/// environment) and parses it, naming the variable in the error.
pub fn env_parse<T: std::str::FromStr>(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    what: &str,
) -> Result<T, BadInput> {
    match lookup(name) {
        None => Ok(default),
        Some(v) if v.trim().is_empty() => Ok(default),
        Some(v) => v.trim().parse::<T>().map_err(|_| {
            BadInput(format!(
                "{name}={:?} is not {what}: set it to {what} or unset it to use the default",
                truncate(&v, 40)
            ))
        }),
    }
}

/// Reads a boolean variable the way n8n does ("true"/"false", case-insensitive; "1"/"0" too).
pub fn env_bool(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: bool,
) -> Result<bool, BadInput> {
    match lookup(name) {
        None => Ok(default),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(default),
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(BadInput(format!(
                "{name}={:?} is not a boolean: set it to true or false",
                truncate(&v, 40)
            ))),
        },
    }
}

/// The process environment as a lookup function.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_errors_name_the_variable() {
        let env = |k: &str| (k == "N8N_RUNNERS_MAX_CONCURRENCY").then(|| "abc".to_string());
        let err = env_parse::<u32>(&env, "N8N_RUNNERS_MAX_CONCURRENCY", 10, "a whole number")
            .unwrap_err();
        assert!(err.0.contains("N8N_RUNNERS_MAX_CONCURRENCY"), "{}", err.0);
        assert_eq!(
            env_parse::<u32>(&env, "OTHER", 7, "a whole number").unwrap(),
            7
        );
        let envb = |_: &str| Some("maybe".to_string());
        assert!(env_bool(&envb, "N8N_METRICS", false).is_err());
    }
}
