//! Numbers given on the command line, held to the range their option allows.

/// Parses `text` as a number that `allowed` accepts; `range` names that range in the error
/// ("in 0..=1").
///
/// # Errors
///
/// When the text is not a number, or `allowed` refuses it (a NaN is refused by any range
/// written as comparisons).
pub(crate) fn parse_number_in(
    text: &str,
    allowed: impl Fn(f64) -> bool,
    range: &str,
) -> Result<f64, String> {
    let number: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if allowed(number) {
        Ok(number)
    } else {
        Err(format!("{number} is not {range}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_outside_its_range_or_no_number_is_refused_with_the_range_named() {
        let unit = |n: f64| (0.0..=1.0).contains(&n);
        assert_eq!(parse_number_in("0.5", unit, "in 0..=1"), Ok(0.5));
        assert_eq!(
            parse_number_in("1.5", unit, "in 0..=1"),
            Err("1.5 is not in 0..=1".to_owned())
        );
        assert_eq!(
            parse_number_in("NaN", unit, "in 0..=1"),
            Err("NaN is not in 0..=1".to_owned())
        );
        assert_eq!(
            parse_number_in("half", unit, "in 0..=1"),
            Err("`half` is not a number".to_owned())
        );
    }
}
