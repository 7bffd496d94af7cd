//! A point written as its line of `metrics.jsonl` directly: the same bytes serde writes (the
//! test holds them equal), without serde's walk over the struct, because an import of a
//! large event file writes millions of them.

use serde_json::ser::{CompactFormatter, Formatter};

use super::MetricPoint;

impl MetricPoint {
    /// Appends the point's line, with its newline, to `out`.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"step\":");
        write_u64(out, self.step);
        out.extend_from_slice(b",\"epoch\":");
        write_u64(out, self.epoch);
        out.extend_from_slice(b",\"wall\":");
        write_float(out, self.wall);
        out.extend_from_slice(b",\"tag\":");
        write_text(out, &self.tag);
        out.extend_from_slice(b",\"value\":");
        write_float(out, self.value);
        out.extend_from_slice(b"}\n");
    }
}

fn write_u64(out: &mut Vec<u8>, v: u64) {
    // Writing to a Vec never fails.
    let _ = CompactFormatter.write_u64(out, v);
}

/// A finite number as serde_json writes it; NaN and the infinities by their names, as
/// [`super::nonfinite`] writes them.
fn write_float(out: &mut Vec<u8>, v: f64) {
    match v {
        v if v.is_finite() => drop(CompactFormatter.write_f64(out, v)),
        v if v.is_nan() => out.extend_from_slice(b"\"NaN\""),
        v if v > 0.0 => out.extend_from_slice(b"\"Infinity\""),
        _ => out.extend_from_slice(b"\"-Infinity\""),
    }
}

/// A string in quotes: as it is when nothing in it needs escaping (a tag, nearly always),
/// else escaped by serde_json.
fn write_text(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(out, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_what_serde_writes() {
        let tags = ["Loss/train", "RMSE(u10m)/valid", "quote \" and \\ back", "tab\tnew\nline", "é ünïcode ✓", "\u{7f}\u{1}", ""];
        let values = [
            0.0,
            -0.0,
            0.1,
            1.0,
            1e21,
            1e-7,
            -3.25,
            1.7e9 + 0.123,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for (i, tag) in tags.iter().enumerate() {
            for (j, &value) in values.iter().enumerate() {
                let point = MetricPoint {
                    step: (i * 1000 + j) as u64,
                    epoch: j as u64,
                    wall: values[(i + j) % values.len()],
                    tag: (*tag).into(),
                    value,
                };
                let mut expected = serde_json::to_vec(&point).unwrap();
                expected.push(b'\n');
                let mut line = Vec::new();
                point.write_line(&mut line);
                assert_eq!(String::from_utf8(line).unwrap(), String::from_utf8(expected).unwrap());
            }
        }
        let point = MetricPoint { step: u64::MAX, epoch: 0, wall: 0.0, tag: "x".into(), value: 1.0 };
        let mut line = Vec::new();
        point.write_line(&mut line);
        assert_eq!(serde_json::from_slice::<MetricPoint>(&line).unwrap(), point);
    }
}
