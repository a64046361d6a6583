//! Readable times for the pages: a Unix-epoch millisecond value as UTC civil time and as "3
//! min ago" against the server's clock, in a `<time>` element whose `datetime` the page's
//! script turns into the reader's local time; the raw value is on hover (`title`).

use std::fmt::Write as _;

/// `ms` (Unix epoch) as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    );
    out
}

/// Howard Hinnant's days-to-civil, for days since 1970-01-01 (no date crate for one formula).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// How long before `now_ms` the moment `ms` was ("3 min ago"), or after it ("in 2 h").
pub fn relative(ms: u64, now_ms: u64) -> String {
    let (delta, future) = if ms <= now_ms {
        (now_ms - ms, false)
    } else {
        (ms - now_ms, true)
    };
    let secs = delta / 1000;
    let amount = if secs < 1 {
        return "just now".to_owned();
    } else if secs < 60 {
        format!("{secs} s")
    } else if secs < 3600 {
        format!("{} min", secs / 60)
    } else if secs < 86_400 {
        format!("{} h", secs / 3600)
    } else {
        format!("{} d", secs / 86_400)
    };
    if future {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// A duration for people: `850 ms`, `2.5 s`, `2 min 21 s`, `1 h 5 min`, `3 d 4 h` (the
/// raw milliseconds stay in the tooltips).
pub fn duration(ms: u64) -> String {
    let secs = ms / 1000;
    if ms < 1000 {
        format!("{ms} ms")
    } else if secs < 10 {
        format!("{}.{} s", secs, (ms % 1000) / 100)
    } else if secs < 60 {
        format!("{secs} s")
    } else if secs < 3600 {
        match secs % 60 {
            0 => format!("{} min", secs / 60),
            rest => format!("{} min {rest} s", secs / 60),
        }
    } else if secs < 86_400 {
        match (secs % 3600) / 60 {
            0 => format!("{} h", secs / 3600),
            rest => format!("{} h {rest} min", secs / 3600),
        }
    } else {
        match (secs % 86_400) / 3600 {
            0 => format!("{} d", secs / 86_400),
            rest => format!("{} d {rest} h", secs / 86_400),
        }
    }
}

/// `ms` as a `<time>` element: UTC and relative text, the raw value on hover.
pub fn time_html(ms: u64, now_ms: u64) -> String {
    let iso = iso_utc(ms);
    let civil = iso
        .replace('T', " ")
        .replace(".000Z", " UTC")
        .replace('Z', " UTC");
    format!(
        r#"<time datetime="{iso}" data-ms="{ms}" title="{ms} ms since the Unix epoch">{civil} · {rel}</time>"#,
        rel = relative(ms, now_ms)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(0), "0 ms");
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(2_540), "2.5 s");
        assert_eq!(duration(42_000), "42 s");
        assert_eq!(duration(141_599), "2 min 21 s");
        assert_eq!(duration(120_000), "2 min");
        assert_eq!(duration(3_900_000), "1 h 5 min");
        assert_eq!(duration(3 * 86_400_000 + 4 * 3_600_000), "3 d 4 h");
        assert_eq!(duration(u64::MAX), "213503982334 d 14 h");
    }

    #[test]
    fn civil_times_and_relative_ones() {
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(1_733_250_000_123), "2024-12-03T18:20:00.123Z");
        assert_eq!(iso_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(relative(1_000, 181_000), "3 min ago");
        assert_eq!(relative(10_000, 10_500), "just now");
        assert_eq!(relative(7_200_000 + 5, 5), "in 2 h");
        let html = time_html(0, 3_600_000);
        assert!(
            html.contains(r#"datetime="1970-01-01T00:00:00.000Z""#),
            "{html}"
        );
        assert!(html.contains("1970-01-01 00:00:00 UTC · 1 h ago"), "{html}");
        assert!(
            html.contains("title=\"0 ms since the Unix epoch\""),
            "{html}"
        );
    }
}
