//! An event in the plain form profilers write, read in one pass without serde: an object whose
//! keys and texts hold no escapes, its numbers and texts taken where they lie, every value the
//! timeline does not read stepped over by its quotes and brackets. Kineto's events are all in
//! this form, and serde_json read them at about a third of the speed (its UTF-8 checks,
//! objects and numbers were half the time to summarise a 230 MB trace). Anything else (an
//! escape, a value that is not JSON, the bytes ending inside the event) is left to serde_json,
//! which reads it, or says what is wrong.
//!
//! The `args` of an event are read only for metadata events (`"ph": "M"`), the only ones whose
//! args the timeline uses; other events' args are stepped over unchecked, as a value nobody
//! reads.

use std::borrow::Cow;

use super::lenient::{Args, RawEvent, Scalar};
use super::value_end::ValueEnd;

/// The event at the start of `text`, and its length; `None` where it is not in the plain form,
/// or not whole in `text`. (Its caller checks the UTF-8 of a stretch of events at once: a
/// check per text was a tenth of the time.)
pub(super) fn event(text: &str) -> Option<(RawEvent<'_>, usize)> {
    let mut cursor = Cursor { text, bytes: text.as_bytes(), at: 0 };
    let mut event = RawEvent::default();
    let mut args = None;
    cursor.expect(b'{')?;
    if cursor.peek()? == b'}' {
        return Some((event, cursor.at + 1));
    }
    loop {
        cursor.expect(b'"')?;
        let key = cursor.text()?;
        cursor.expect(b':')?;
        cursor.space();
        match key {
            "ph" => event.ph = cursor.scalar()?,
            "name" => event.name = cursor.scalar()?,
            "cat" => event.cat = cursor.scalar()?,
            "pid" => event.pid = cursor.scalar()?,
            "tid" => event.tid = cursor.scalar()?,
            "ts" => event.ts = cursor.scalar()?,
            "dur" => event.dur = cursor.scalar()?,
            "args" => args = Some(cursor.skip()?),
            _ => _ = cursor.skip()?,
        }
        match cursor.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    if let (Scalar::Text(ph), Some(args)) = (&event.ph, args)
        && ph == "M"
    {
        event.args = serde_json::from_slice::<Args<'_>>(args).ok()?;
    }
    Some((event, cursor.at))
}

struct Cursor<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn space(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// The next byte that is not white space, not taken.
    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.bytes.get(self.at).copied()
    }

    /// The next byte that is not white space, taken.
    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// A text whose opening quote is taken, up to its closing quote: `None` for one with an
    /// escape or a control character (serde_json's to read or refuse).
    fn text(&mut self) -> Option<&'a str> {
        let start = self.at;
        let len = self.bytes.get(start..)?.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if self.bytes[start + len] != b'"' {
            return None;
        }
        self.at += len + 1;
        // Both ends are ASCII bytes, so on the boundaries of characters.
        self.text.get(start..start + len)
    }

    /// The value here as the timeline reads it: a text, a number, or `Other` for the rest.
    fn scalar(&mut self) -> Option<Scalar<'a>> {
        match *self.bytes.get(self.at)? {
            b'"' => {
                self.at += 1;
                self.text().map(|text| Scalar::Text(Cow::Borrowed(text)))
            }
            b'-' | b'0'..=b'9' => self.number().map(Scalar::Number),
            _ => self.skip().map(|_| Scalar::Other),
        }
    }

    /// The value here stepped over: its bytes.
    fn skip(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.at..)?;
        let len = match rest.first()? {
            b'{' | b'[' | b'"' => ValueEnd::default().run(rest)?,
            b't' if rest.starts_with(b"true") => 4,
            b'f' if rest.starts_with(b"false") => 5,
            b'n' if rest.starts_with(b"null") => 4,
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                self.number()?;
                return Some(&self.bytes[start..self.at]);
            }
            _ => return None,
        };
        self.at += len;
        Some(&rest[..len])
    }

    /// A number as JSON writes it (no `+`, no leading zeros, digits on both sides of a point).
    fn number(&mut self) -> Option<f64> {
        let rest = self.bytes.get(self.at..)?;
        let mut number = Digits::default();
        let negative = rest.first() == Some(&b'-');
        let mut len = usize::from(negative);
        let whole = number.take(&rest[len..]);
        if whole == 0 || (whole > 1 && rest[len] == b'0') {
            return None;
        }
        len += whole;
        let mut fraction = 0;
        if rest.get(len) == Some(&b'.') {
            fraction = number.take(&rest[len + 1..]);
            if fraction == 0 {
                return None;
            }
            len += 1 + fraction;
        }
        let mut exact = number.exact().filter(|_| fraction < POWERS_OF_TEN.len());
        if matches!(rest.get(len), Some(b'e' | b'E')) {
            len += 1 + usize::from(matches!(rest.get(len + 1), Some(b'+' | b'-')));
            let exponent = rest.get(len..).map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count());
            if exponent == 0 {
                return None;
            }
            len += exponent;
            exact = None;
        }
        // A number must be seen to end: the bytes may stop in the middle of it.
        rest.get(len)?;
        self.at += len;
        match exact {
            // Both exact in an f64: the quotient is rounded once, so it is the nearest f64.
            Some(mantissa) => {
                let value = mantissa / POWERS_OF_TEN[fraction];
                Some(if negative { -value } else { value })
            }
            None => self.text.get(self.at - len..self.at)?.parse().ok(),
        }
    }
}

/// Powers of ten exact in an f64.
const POWERS_OF_TEN: [f64; 23] = {
    let mut powers = [1.0; 23];
    let mut i = 1;
    while i < powers.len() {
        powers[i] = powers[i - 1] * 10.0;
        i += 1;
    }
    powers
};

/// The digits of a number read so far, as one integer (the point left out).
#[derive(Default)]
struct Digits {
    value: u64,
    /// Whether it grew past what an f64 holds exactly.
    inexact: bool,
}

impl Digits {
    /// Takes the digits at the start of `bytes`: how many there were.
    fn take(&mut self, bytes: &[u8]) -> usize {
        let count = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        for &digit in &bytes[..count] {
            match self.value.checked_mul(10).and_then(|v| v.checked_add(u64::from(digit - b'0'))) {
                Some(value) if value <= 1 << f64::MANTISSA_DIGITS => self.value = value,
                _ => self.inexact = true,
            }
        }
        count
    }

    fn exact(&self) -> Option<f64> {
        (!self.inexact).then_some(self.value as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::trace::lenient::Entry;

    /// The event as serde_json reads it.
    fn by_serde(text: &str) -> RawEvent<'_> {
        let Entry(event) = serde_json::from_str(text).unwrap();
        event.unwrap()
    }

    #[test]
    fn a_plain_event_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 3120, "tid": 3120, "ts": 1700000000123.5, "dur": 42,
                "args": {"External id": 7, "Input Dims": [[8, 16], [16, 32]], "Input type": ["float", "float"]}}"#,
            r#"{"ph":"M","name":"thread_name","pid":1,"tid":"stream 7","args":{"name":"stream 7 \"compute\"","sort_index":3}}"#,
            r#"{"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "GPU 0"}}"#,
            r#"{"ph": "i", "s": "t", "name": "x", "ts": -1.5e-3, "dur": null, "pid": [1], "tid": {"a": 1}, "x": true, "y": false}"#,
            r#"{"ph": "B", "name": "μs ✓", "ts": 0, "args": 5}"#,
            r#"{ }"#,
        ] {
            let (event, len) = event(text).unwrap_or_else(|| panic!("{text} is plain"));
            assert_eq!((event, len), (by_serde(text), text.len()), "{text}");
        }
    }

    #[test]
    fn numbers_read_as_the_standard_library_reads_them() {
        for number in [
            "0",
            "-0",
            "7",
            "42.5",
            "1700000000123.456",
            "9007199254740993",
            "123456789012345678901234",
            "0.1",
            "-0.000123",
            "3.14159265358979323846",
            "1e3",
            "-2.5E-7",
            "6.02e+23",
            "1.0000000000000000000000001",
        ] {
            let text = format!(r#"{{"ts": {number}}}"#);
            let expected: f64 = number.parse().unwrap();
            let (event, _) = event(&text).unwrap();
            assert_eq!(event.ts, Scalar::Number(expected), "{number}");
            assert_eq!(event.ts.number().map(f64::to_bits), Some(expected.to_bits()), "{number}: the same bits");
        }
    }

    #[test]
    fn what_is_not_plain_or_not_whole_is_left_to_serde_json() {
        for text in [
            r#"{"name": "a \"quoted\" name"}"#,
            r#"{"na\u006de": "a"}"#,
            r#"{"name": "a", }"#,
            r#"{"ts": 01}"#,
            r#"{"ts": 1.}"#,
            r#"{"ts": +1}"#,
            r#"{"ts": 1e}"#,
            r#"{"ts": nope}"#,
            r#"{"ph": "M", "name": "thread_name", "args": {"name": nope}}"#,
            r#"{"name": "a" "cat": "b"}"#,
            r#"{"name": "a", "ts": 12"#,
            r#"{"name": "a", "args": {"x": [1, 2"#,
            "[1, 2]",
        ] {
            assert!(event(text).is_none(), "{text}");
        }
        // Not whole: a text cut in its middle by the end of what was read.
        assert!(event(r#"{"name": "ab"#).is_none());
        // The end of an event is where its object closes, whatever follows it.
        assert_eq!(event(r#"{"ts": 12}, {"ts": 13}"#).map(|(e, len)| (e.ts, len)), Some((Scalar::Number(12.0), 10)));
    }
}
