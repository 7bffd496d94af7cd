//! Where a JSON value ends, found by its quotes, escapes and brackets alone: how the trace
//! reader cuts a chunk into events, and steps over values it does not read.

/// Where a JSON value ends, found a stretch at a time: what the scan has seen of it so far.
#[derive(Debug, Default)]
pub(super) struct ValueEnd {
    /// Bytes of the value scanned so far.
    at: usize,
    /// Brackets open.
    depth: usize,
    in_text: bool,
    /// A number or a literal: it ends where a separator or white space starts.
    pub(super) scalar: bool,
}

/// The bytes that matter outside strings: quotes and brackets.
const STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table
};

impl ValueEnd {
    /// Goes on over `value` (the value's bytes from its start, as far as they are read): its
    /// length once its end is in them. A scalar's end may be the end of the file, which its
    /// caller knows and this does not.
    pub(super) fn run(&mut self, value: &[u8]) -> Option<usize> {
        if self.at == 0 {
            match value.first()? {
                b'{' | b'[' => self.depth = 1,
                b'"' => self.in_text = true,
                _ => self.scalar = true,
            }
            self.at = 1;
        }
        while self.at < value.len() {
            let rest = &value[self.at..];
            if self.scalar {
                let found = rest.iter().position(|&b| matches!(b, b',' | b']' | b'}') || b.is_ascii_whitespace());
                return found.map(|i| self.at + i).or_else(|| {
                    self.at = value.len();
                    None
                });
            }
            if self.in_text {
                // Texts in a trace are short: a plain loop beats a vectorised search's set-up.
                let Some(i) = rest.iter().position(|&b| b == b'"' || b == b'\\') else {
                    self.at = value.len();
                    return None;
                };
                self.at += i;
                if value[self.at] == b'\\' {
                    // The escaped byte is skipped whatever it is (perhaps not read yet).
                    self.at += 2;
                    continue;
                }
                self.at += 1;
                self.in_text = false;
                if self.depth == 0 {
                    return Some(self.at);
                }
                continue;
            }
            let Some(i) = rest.iter().position(|&b| STRUCTURAL[usize::from(b)]) else {
                self.at = value.len();
                return None;
            };
            self.at += i + 1;
            match rest[i] {
                b'"' => self.in_text = true,
                b'{' | b'[' => self.depth += 1,
                _ => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(self.at);
                    }
                }
            }
        }
        None
    }
}
