//! The `Date` header (RFC 9110 §6.6.1): IMF-fixdate, formatted once per
//! second per thread. A helper at the bottom of the crate's layers (see
//! `lib.rs`), for `wire.rs`.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// The length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) const LEN: usize = 29;

/// Appends the current date to `out`. The formatted text is cached per
/// thread and per second (a worker formats it at most once a second).
pub(crate) fn append_now(out: &mut Vec<u8>) {
    thread_local! {
        static CACHE: RefCell<(u64, [u8; LEN])> = const { RefCell::new((u64::MAX, [0; LEN])) };
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != now {
            *cache = (now, imf_fixdate(now));
        }
        out.extend_from_slice(&cache.1);
    });
}

/// `secs` since the Unix epoch as an IMF-fixdate (years past 9999 are
/// clamped to 9999-12-31T23:59:59, the format has four digits).
pub(crate) fn imf_fixdate(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let secs = secs.min(253_402_300_799);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (year, month, day) = civil_from_days(days);
    let mut out = [0u8; LEN];
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[3..5].copy_from_slice(b", ");
    two(&mut out[5..7], day);
    out[7] = b' ';
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    out[11] = b' ';
    two(&mut out[12..14], year / 100);
    two(&mut out[14..16], year % 100);
    out[16] = b' ';
    two(&mut out[17..19], hour);
    out[19] = b':';
    two(&mut out[20..22], minute);
    out[22] = b':';
    two(&mut out[23..25], second);
    out[25..].copy_from_slice(b" GMT");
    out
}

fn two(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), proleptic
/// Gregorian (Howard Hinnant's `civil_from_days`, for days >= 0).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(secs: u64) -> String {
        String::from_utf8(imf_fixdate(secs).to_vec()).expect("ascii")
    }

    #[test]
    fn known_dates() {
        // RFC 9110 §5.6.7's example.
        assert_eq!(fmt(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(fmt(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        // A leap day, a century that is a leap year.
        assert_eq!(fmt(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        // A century that is not a leap year.
        assert_eq!(fmt(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT");
        assert_eq!(fmt(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 GMT");
        assert_eq!(fmt(253_402_300_799), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(fmt(u64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn now_is_cached_and_well_formed() {
        let mut a = Vec::new();
        append_now(&mut a);
        assert_eq!(a.len(), LEN);
        assert!(a.ends_with(b" GMT"));
        let parsed = httparse_date(&a);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        assert!(now.abs_diff(parsed) <= 2, "{now} vs {parsed}");
    }

    /// Inverts `imf_fixdate` by search (a test helper, not a parser).
    fn httparse_date(text: &[u8]) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        (now - 5..now + 5)
            .find(|s| imf_fixdate(*s) == text)
            .expect("a date within 5 s of now")
    }
}
