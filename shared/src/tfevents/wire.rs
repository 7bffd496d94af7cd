//! The protocol-buffer wire format, as far as event files need it: writing keys, varints,
//! fixed-width numbers and length-delimited fields, and reading a message field by field.
//!
//! Reading skips every field by its wire type, groups included, so a file from a newer
//! TensorBoard (or with summaries of plugins this reader does not know) reads the same.

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;
const START_GROUP: u32 = 3;
const END_GROUP: u32 = 4;
const FIXED32: u32 = 5;

/// How deep groups may nest before the message is refused (a real file never nests them).
const MAX_GROUP_DEPTH: usize = 32;

/// One field's value as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
}

impl<'a> Field<'a> {
    pub fn varint(self) -> Option<u64> {
        match self {
            Field::Varint(v) => Some(v),
            _ => None,
        }
    }

    pub fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Field::Bytes(b) => Some(b),
            _ => None,
        }
    }

    pub fn double(self) -> Option<f64> {
        match self {
            Field::Fixed64(b) => Some(f64::from_le_bytes(b)),
            _ => None,
        }
    }

    pub fn float(self) -> Option<f32> {
        match self {
            Field::Fixed32(b) => Some(f32::from_le_bytes(b)),
            _ => None,
        }
    }
}

/// A message's fields in order, as `(field number, value)`; an error names what is wrong.
pub struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        // Most varints (every key, most lengths) are one byte.
        if let Some(&byte) = self.bytes.get(self.at)
            && byte < 0x80
        {
            self.at += 1;
            return Ok(u64::from(byte));
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at).ok_or("a varint runs past the end of its message")?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint is longer than 10 bytes")
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len()).ok_or("a field runs past the end of its message")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn key(&mut self) -> Result<(u32, u32), &'static str> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| "a field number is out of range")?;
        Ok((number, (key & 7) as u32))
    }

    /// Skips a group's fields up to the end of group `number`.
    fn skip_group(&mut self, number: u32, depth: usize) -> Result<(), &'static str> {
        if depth > MAX_GROUP_DEPTH {
            return Err("groups nest too deeply");
        }
        loop {
            if self.at >= self.bytes.len() {
                return Err("a group has no end");
            }
            match self.key()? {
                (n, END_GROUP) if n == number => return Ok(()),
                (_, END_GROUP) => return Err("a group ends with another group's number"),
                (n, START_GROUP) => self.skip_group(n, depth + 1)?,
                (_, wire) => {
                    self.value(wire)?;
                }
            }
        }
    }

    fn value(&mut self, wire: u32) -> Result<Field<'a>, &'static str> {
        Ok(match wire {
            VARINT => Field::Varint(self.varint()?),
            FIXED64 => Field::Fixed64(self.take(8)?.try_into().map_err(|_| "short fixed64")?),
            LEN => {
                let len = usize::try_from(self.varint()?).map_err(|_| "a length is out of range")?;
                Field::Bytes(self.take(len)?)
            }
            FIXED32 => Field::Fixed32(self.take(4)?.try_into().map_err(|_| "short fixed32")?),
            _ => return Err("a field has an unknown wire type"),
        })
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Field<'a>), &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.at >= self.bytes.len() {
                return None;
            }
            let read = self.key().and_then(|(number, wire)| match wire {
                START_GROUP => self.skip_group(number, 1).map(|()| None),
                END_GROUP => Err("a group ends that never started"),
                wire => self.value(wire).map(|value| Some((number, value))),
            });
            match read {
                Ok(Some(field)) => return Some(Ok(field)),
                Ok(None) => continue,
                Err(e) => {
                    // Nothing after a broken field can be trusted.
                    self.at = self.bytes.len();
                    return Some(Err(e));
                }
            }
        }
    }
}

pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(buf, u64::from(field) << 3 | u64::from(wire));
}

pub fn put_varint_field(buf: &mut Vec<u8>, field: u32, v: u64) {
    put_key(buf, field, VARINT);
    put_varint(buf, v);
}

pub fn put_double(buf: &mut Vec<u8>, field: u32, v: f64) {
    put_key(buf, field, FIXED64);
    buf.extend_from_slice(&v.to_le_bytes());
}

pub fn put_float(buf: &mut Vec<u8>, field: u32, v: f32) {
    put_key(buf, field, FIXED32);
    buf.extend_from_slice(&v.to_le_bytes());
}

pub fn put_bytes(buf: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(buf, field, LEN);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Result<Vec<(u32, Field<'_>)>, &'static str> {
        Fields::new(bytes).collect()
    }

    #[test]
    fn varints_encode_like_protobuf() {
        let mut b = Vec::new();
        put_varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
    }

    #[test]
    fn every_kind_of_field_reads_back() {
        let mut b = Vec::new();
        put_varint_field(&mut b, 2, 300);
        put_double(&mut b, 1, 1.5);
        put_float(&mut b, 7, -2.25);
        put_bytes(&mut b, 12, b"tag");
        put_varint_field(&mut b, 3, u64::MAX);
        let read = fields(&b).unwrap();
        assert_eq!(
            read,
            [
                (2, Field::Varint(300)),
                (1, Field::Fixed64(1.5f64.to_le_bytes())),
                (7, Field::Fixed32((-2.25f32).to_le_bytes())),
                (12, Field::Bytes(b"tag")),
                (3, Field::Varint(u64::MAX)),
            ]
        );
        assert_eq!(read[1].1.double(), Some(1.5));
        assert_eq!(read[2].1.float(), Some(-2.25));
        assert_eq!(read[0].1.bytes(), None);
    }

    #[test]
    fn groups_are_skipped_with_everything_inside() {
        let mut b = Vec::new();
        put_varint_field(&mut b, 1, 5);
        put_key(&mut b, 9, START_GROUP);
        put_bytes(&mut b, 2, b"inside");
        put_key(&mut b, 4, START_GROUP);
        put_double(&mut b, 1, 2.0);
        put_key(&mut b, 4, END_GROUP);
        put_key(&mut b, 9, END_GROUP);
        put_varint_field(&mut b, 3, 6);
        assert_eq!(fields(&b).unwrap(), [(1, Field::Varint(5)), (3, Field::Varint(6))]);
    }

    #[test]
    fn broken_messages_are_refused_not_misread() {
        let mut b = Vec::new();
        put_bytes(&mut b, 1, b"abcdef");
        assert_eq!(fields(&b[..b.len() - 1]), Err("a field runs past the end of its message"));
        assert_eq!(fields(&[0x08, 0x80]), Err("a varint runs past the end of its message"));
        assert_eq!(fields(&[0x0e]), Err("a field has an unknown wire type"));
        assert_eq!(fields(&[0x0c]), Err("a group ends that never started"));
        assert_eq!(fields(&[0x0b, 0x08, 0x01]), Err("a group has no end"));
        assert_eq!(
            fields(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err("a varint is longer than 10 bytes")
        );
    }
}
