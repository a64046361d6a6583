//! How long a provider asks a client to wait, read from the response's headers (SPEC §13, "Rate
//! limits and empty content"; §8.11): the `retry_after_ms` of a `model_failed`.
//!
//! Read, in this order (the first that reads wins):
//! 1. `retry-after-ms`: milliseconds (OpenAI);
//! 2. `retry-after`: seconds, or an HTTP date (RFC 9110 §10.2.3: IMF-fixdate, the obsolete RFC
//!    850 and asctime forms);
//! 3. for a `rate_limited` failure only, the providers' reset headers: Anthropic's
//!    `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (RFC 3339 times)
//!    and OpenAI's `x-ratelimit-reset-{requests,tokens}` (durations such as `1s`, `6m0s`,
//!    `20ms`). The latest reset of a limit whose `…remaining…` header says `0` wins; when no
//!    limit says so, the latest reset of all.
//!
//! Pure: a date becomes a delay against a reference the caller gives (`now_ms`, milliseconds
//! since the Unix epoch), or else against the response's own `date` header; with neither, a
//! date is not read. A date in the past is a wait of 0. Names match case-insensitively; a
//! value that does not read is ignored.

/// The waits read from one response's headers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RetryHints {
    /// From `retry-after-ms` or `retry-after`: good for any failure.
    after_ms: Option<u64>,
    /// From the rate-limit reset headers: good for `rate_limited` only.
    reset_ms: Option<u64>,
}

impl RetryHints {
    /// Reads `headers` (name, value pairs); `now_ms` is the reference for dates.
    pub(crate) fn read<K, V>(headers: impl IntoIterator<Item = (K, V)>, now_ms: Option<u64>) -> Self
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let headers: Vec<(String, String)> = headers
            .into_iter()
            .map(|(k, v)| {
                (
                    k.as_ref().trim().to_ascii_lowercase(),
                    v.as_ref().trim().to_owned(),
                )
            })
            .collect();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let now = now_ms.or_else(|| get("date").and_then(http_date_ms));
        let after_ms = get("retry-after-ms").and_then(decimal_ms(1.0)).or_else(|| {
            let value = get("retry-after")?;
            decimal_ms(1000.0)(value).or_else(|| Some(http_date_ms(value)?.saturating_sub(now?)))
        });
        // (reset, exhausted) per limit.
        let mut resets: Vec<(u64, bool)> = Vec::new();
        for (name, value) in &headers {
            if let Some(limit) = name
                .strip_prefix("anthropic-ratelimit-")
                .and_then(|rest| rest.strip_suffix("-reset"))
            {
                if let (Some(at), Some(now)) = (rfc3339_ms(value), now) {
                    let remaining = get(&format!("anthropic-ratelimit-{limit}-remaining"));
                    resets.push((at.saturating_sub(now), remaining == Some("0")));
                }
            } else if let Some(limit) = name.strip_prefix("x-ratelimit-reset-")
                && let Some(wait) = duration_ms(value)
            {
                let remaining = get(&format!("x-ratelimit-remaining-{limit}"));
                resets.push((wait, remaining == Some("0")));
            }
        }
        let exhausted = resets.iter().filter(|(_, e)| *e).map(|(ms, _)| *ms).max();
        let reset_ms = exhausted.or_else(|| resets.iter().map(|(ms, _)| *ms).max());
        RetryHints { after_ms, reset_ms }
    }

    /// The wait for a failure of `code`.
    pub(crate) fn for_failure(&self, code: crate::FailureCode) -> Option<u64> {
        self.after_ms.or(match code {
            crate::FailureCode::RateLimited => self.reset_ms,
            _ => None,
        })
    }
}

/// A non-negative decimal number of units of `scale` milliseconds, rounded up.
fn decimal_ms(scale: f64) -> impl Fn(&str) -> Option<u64> {
    move |value: &str| {
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        let number: f64 = value.parse().ok()?;
        let ms = (number * scale).ceil();
        whole_ms(ms)
    }
}

/// Milliseconds as a whole number: `None` for a negative or non-finite value (a cast from a
/// float saturates at `u64::MAX`).
fn whole_ms(ms: f64) -> Option<u64> {
    (ms.is_finite() && ms >= 0.0).then_some(ms as u64)
}

/// A Go-style duration (`1s`, `6m0s`, `1h2m3.5s`, `20ms`, `0.5s`) in milliseconds, rounded up.
fn duration_ms(value: &str) -> Option<u64> {
    let mut rest = value;
    let mut total = 0.0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1000.0,
            "ms" => 1.0,
            "us" | "µs" => 0.001,
            "ns" => 0.000_001,
            _ => return None,
        };
        total += number * scale;
        rest = tail;
    }
    let ms = total.ceil();
    whole_ms(ms)
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Milliseconds since the epoch of a date and time of day, if it is one (and not before 1970).
fn epoch_ms(year: i64, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Option<u64> {
    if !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let seconds = days
        .checked_mul(86_400)?
        .checked_add(i64::from(hour * 3600 + minute * 60 + second))?;
    u64::try_from(seconds).ok()?.checked_mul(1000)
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let name = name.to_ascii_lowercase();
    (1u32..)
        .zip(MONTHS)
        .find(|(_, m)| *m == name)
        .map(|(n, _)| n)
}

fn clock(text: &str) -> Option<(u32, u32, u32)> {
    let mut parts = text.split(':');
    let hour = parts.next()?.parse().ok()?;
    let minute = parts.next()?.parse().ok()?;
    let second = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((hour, minute, second))
}

/// An HTTP date (IMF-fixdate, RFC 850 or asctime) in milliseconds since the epoch.
pub(crate) fn http_date_ms(value: &str) -> Option<u64> {
    let words: Vec<&str> = value.split_whitespace().collect();
    match words.as_slice() {
        // Sun, 06 Nov 1994 08:49:37 GMT
        [_, day, month, year, time, "GMT"] => {
            let (h, m, s) = clock(time)?;
            epoch_ms(
                year.parse().ok()?,
                month_number(month)?,
                day.parse().ok()?,
                h,
                m,
                s,
            )
        }
        // Sunday, 06-Nov-94 08:49:37 GMT
        [_, date, time, "GMT"] => {
            let mut parts = date.split('-');
            let day = parts.next()?.parse().ok()?;
            let month = month_number(parts.next()?)?;
            let year: i64 = parts.next()?.parse().ok()?;
            let year = if year < 70 {
                year + 2000
            } else if year < 100 {
                year + 1900
            } else {
                year
            };
            let (h, m, s) = clock(time)?;
            epoch_ms(year, month, day, h, m, s)
        }
        // Sun Nov  6 08:49:37 1994
        [_, month, day, time, year] => {
            let (h, m, s) = clock(time)?;
            epoch_ms(
                year.parse().ok()?,
                month_number(month)?,
                day.parse().ok()?,
                h,
                m,
                s,
            )
        }
        _ => None,
    }
}

/// An RFC 3339 time (`2024-05-01T12:00:00Z`, fractions and offsets allowed) in milliseconds
/// since the epoch, rounded up to the millisecond.
fn rfc3339_ms(value: &str) -> Option<u64> {
    let (date, time) = value.split_once(['T', 't', ' '])?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() {
        return None;
    }
    let (clock_text, offset_minutes) = if let Some(clock_text) = time.strip_suffix(['Z', 'z']) {
        (clock_text, 0i64)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock_text, offset) = time.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (h, m) = offset.get(1..)?.split_once(':')?;
        let h: i64 = h.parse().ok()?;
        let m: i64 = m.parse().ok()?;
        (clock_text, sign * (h * 60 + m))
    };
    let (whole, fraction) = match clock_text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (clock_text, ""),
    };
    let (h, m, s) = clock(whole)?;
    let mut ms = epoch_ms(year, month, day, h, m, s)?;
    if !fraction.is_empty() {
        if !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let millis: f64 = format!("0.{fraction}").parse().ok()?;
        ms = ms.saturating_add((millis * 1000.0).ceil() as u64);
    }
    let shift = offset_minutes.saturating_mul(60_000);
    if shift >= 0 {
        ms.checked_sub(u64::try_from(shift).ok()?)
    } else {
        ms.checked_add(u64::try_from(-shift).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureCode;

    const NOW: u64 = 784_111_777_000; // Sun, 06 Nov 1994 08:49:37 GMT

    fn wait(headers: &[(&str, &str)], now: Option<u64>, code: FailureCode) -> Option<u64> {
        RetryHints::read(headers.iter().copied(), now).for_failure(code)
    }

    #[test]
    fn dates() {
        assert_eq!(http_date_ms("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOW));
        assert_eq!(http_date_ms("Sunday, 06-Nov-94 08:49:37 GMT"), Some(NOW));
        assert_eq!(http_date_ms("Sun Nov  6 08:49:37 1994"), Some(NOW));
        assert_eq!(http_date_ms("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date_ms("Sun, 06 Nov 1994 25:49:37 GMT"), None);
        assert_eq!(http_date_ms("yesterday"), None);
        assert_eq!(rfc3339_ms("1994-11-06T08:49:37Z"), Some(NOW));
        assert_eq!(rfc3339_ms("1994-11-06T09:49:37.250+01:00"), Some(NOW + 250));
        assert_eq!(rfc3339_ms("1994-11-06"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ms("1s"), Some(1000));
        assert_eq!(duration_ms("6m0s"), Some(360_000));
        assert_eq!(duration_ms("1h2m3.5s"), Some(3_723_500));
        assert_eq!(duration_ms("20ms"), Some(20));
        assert_eq!(duration_ms("0.5s"), Some(500));
        assert_eq!(duration_ms(""), None);
        assert_eq!(duration_ms("5"), None);
        assert_eq!(duration_ms("soon"), None);
    }

    #[test]
    fn precedence_and_references() {
        let rl = FailureCode::RateLimited;
        assert_eq!(wait(&[("Retry-After", "3")], None, rl), Some(3000));
        assert_eq!(wait(&[("retry-after", "1.5")], None, rl), Some(1500));
        assert_eq!(
            wait(
                &[("retry-after", "3"), ("retry-after-ms", "1234")],
                None,
                rl
            ),
            Some(1234)
        );
        let date = [("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")];
        assert_eq!(wait(&date, Some(NOW), rl), Some(30_000));
        assert_eq!(wait(&date, None, rl), None, "no reference, no date");
        let with_date_header = [
            ("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT"),
            ("date", "Sun, 06 Nov 1994 08:49:57 GMT"),
        ];
        assert_eq!(wait(&with_date_header, None, rl), Some(10_000));
        assert_eq!(wait(&date, Some(NOW + 60_000), rl), Some(0), "a past date");
        assert_eq!(wait(&[("retry-after", "-1")], None, rl), None);
        assert_eq!(wait(&[("retry-after", "soon")], None, rl), None);
    }

    #[test]
    fn reset_headers_for_rate_limits_only() {
        let openai = [
            ("x-ratelimit-remaining-requests", "10"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(wait(&openai, None, FailureCode::RateLimited), Some(360_000));
        assert_eq!(wait(&openai, None, FailureCode::ServerError), None);
        let none_exhausted = [
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "2s"),
        ];
        assert_eq!(
            wait(&none_exhausted, None, FailureCode::RateLimited),
            Some(2000)
        );
        let anthropic = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "1994-11-06T08:49:42Z"),
            ("anthropic-ratelimit-tokens-remaining", "500"),
            ("anthropic-ratelimit-tokens-reset", "1994-11-06T08:59:37Z"),
        ];
        assert_eq!(
            wait(&anthropic, Some(NOW), FailureCode::RateLimited),
            Some(5000)
        );
        assert_eq!(wait(&anthropic, None, FailureCode::RateLimited), None);
        // retry-after wins over the resets, for any code.
        let both = [("retry-after", "7"), ("x-ratelimit-reset-tokens", "1s")];
        assert_eq!(wait(&both, None, FailureCode::RateLimited), Some(7000));
        assert_eq!(wait(&both, None, FailureCode::Overloaded), Some(7000));
    }
}
