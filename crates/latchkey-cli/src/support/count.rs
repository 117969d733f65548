//! Counts on the command line: `--permits N`, a latch's `--count N`, a
//! barrier's `--parties N`, `--replicas N`.
//!
//! Checked here, as a clap `value_parser`, so that the message quotes what
//! the user typed and says the bounds: `-1` is "not a whole number from 1 to
//! 100000", never clap's "unexpected argument '-1'" (which needs
//! `allow_negative_numbers` on the argument too) nor a library constant's
//! name.

/// A whole number from 1 to [`latchkey::limits::MAX_COUNT`].
pub fn parse(text: &str) -> Result<u64, String> {
    // Clap quotes the value before this message.
    let bounds = format!(
        "it must be a whole number from 1 to {}",
        latchkey::limits::MAX_COUNT
    );
    let trimmed = text.trim();
    let why = match trimmed.parse::<u64>() {
        Ok(n) if (1..=u64::from(latchkey::limits::MAX_COUNT)).contains(&n) => return Ok(n),
        Ok(0) => "0 is too small",
        Ok(_) => "too large",
        Err(_) if trimmed.starts_with('-') => "negative",
        Err(_) => "not a whole number",
    };
    Err(format!("{bounds} ({why})"))
}

/// A number of replicas (`--replicas N`): a whole number, 0 or more.
pub fn parse_replicas(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    match trimmed.parse::<usize>() {
        Ok(n) => Ok(n),
        Err(_) if trimmed.starts_with('-') => {
            Err("it must be a whole number, 0 or more (negative)".to_owned())
        }
        Err(_) => Err("it must be a whole number, 0 or more".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_said_with_the_number() {
        assert_eq!(parse("1"), Ok(1));
        assert_eq!(parse("100000"), Ok(100_000));
        for (bad, why) in [
            ("0", "too small"),
            ("100001", "too large"),
            ("99999999999999999999999", "not a whole number"),
            ("-1", "negative"),
            ("2.5", "not a whole number"),
            ("", "not a whole number"),
            ("three", "not a whole number"),
        ] {
            let message = parse(bad).unwrap_err();
            assert!(message.contains(why), "{bad:?}: {message}");
            assert!(message.contains("1 to 100000"), "{bad:?}: {message}");
        }
    }
}
