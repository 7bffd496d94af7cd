//! TFRecord framing, the container of every event file: each record is its payload's length
//! (u64, little-endian), the masked CRC-32C of those 8 bytes, the payload, and the payload's
//! masked CRC-32C.
//!
//! A file being written ends, most of the time, in the middle of a record. Reading stops
//! before such a tail and says where it starts, so a reader following a live file reads again
//! from there once more bytes have arrived. Damage anywhere else is an error naming the byte.

use super::crc::masked_crc32c;
use crate::Error;

/// Length and its checksum.
pub const HEADER: usize = 12;
/// The longest payload read. TensorBoard's own writers stay far below it (an image or a graph
/// is a few MB); a length past it, even with a good checksum, is damage or a hostile file, and
/// is refused before anything is read for it.
pub const MAX_PAYLOAD: u64 = 256 << 20;
/// The payload's checksum.
const FOOTER: usize = 4;

/// `payload` framed as one record.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u64).to_le_bytes();
    let mut record = Vec::with_capacity(HEADER + payload.len() + FOOTER);
    record.extend_from_slice(&len);
    record.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    record.extend_from_slice(payload);
    record.extend_from_slice(&masked_crc32c(payload).to_le_bytes());
    record
}

/// One record's payload and where its record starts in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload<'a> {
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// Calls `visit` with each complete record of `bytes` in turn (they start at byte `start` of
/// their file: the offsets in errors and payloads are the file's), and returns where the next
/// read should start: the end of the last complete record, the start of an incomplete one if
/// the stretch ends inside one. Damage is an error once the records before it have been
/// visited, so a reader keeps what a damaged file held up to the damage.
pub fn each<'a>(bytes: &'a [u8], start: u64, mut visit: impl FnMut(Payload<'a>) -> Result<(), Error>) -> Result<u64, Error> {
    let mut at = 0usize;
    let offset_of = |at: usize| start + at as u64;
    while let Some(header) = bytes.get(at..at + HEADER) {
        let len = payload_len(header, offset_of(at))?;
        let end = usize::try_from(len).ok().and_then(|len| (at + HEADER).checked_add(len)?.checked_add(FOOTER));
        let Some(end) = end else {
            return Err(damaged(offset_of(at), format!("the record claims {len} bytes, more than can be read")));
        };
        let Some(record) = bytes.get(at..end) else { break };
        let (payload, crc) = record[HEADER..].split_at(record.len() - HEADER - FOOTER);
        if masked_crc32c(payload) != u32_le(crc) {
            return Err(damaged(offset_of(at), "the record's payload fails its checksum (masked CRC-32C): the event file is damaged"));
        }
        visit(Payload { offset: offset_of(at), bytes: payload })?;
        at = end;
    }
    Ok(offset_of(at))
}

/// Where the first record at or after byte `target` of `bytes` starts, found by walking the
/// records' lengths from the start without checking them: a place to cut a stretch so that its
/// parts can be read apart (each is checked as it is read). `bytes.len()` when the walk ends
/// before `target` (a record cut short, or a length that cannot be).
pub fn boundary_after(bytes: &[u8], target: usize) -> usize {
    let mut at = 0usize;
    while at < target {
        let Some(len) = bytes.get(at..at + 8) else { return bytes.len() };
        let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
        match usize::try_from(len).ok().and_then(|len| at.checked_add(HEADER)?.checked_add(len)?.checked_add(FOOTER)) {
            Some(next) if next <= bytes.len() => at = next,
            _ => return bytes.len(),
        }
    }
    at
}

/// The whole size of the record whose 12-byte header is `header` (read at byte `offset`):
/// what a reader must hold to read it. A length that fails its checksum or passes
/// [`MAX_PAYLOAD`] is an error.
pub fn record_size(header: &[u8], offset: u64) -> Result<u64, Error> {
    Ok(HEADER as u64 + payload_len(header, offset)? + FOOTER as u64)
}

fn payload_len(header: &[u8], offset: u64) -> Result<u64, Error> {
    let (len, crc) = header.get(..HEADER).ok_or_else(|| damaged(offset, "a record header is 12 bytes"))?.split_at(8);
    if masked_crc32c(len) != u32_le(crc) {
        return Err(damaged(
            offset,
            "the record's length fails its checksum (masked CRC-32C): not a TensorBoard event file, or a damaged one",
        ));
    }
    let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
    if len > MAX_PAYLOAD {
        return Err(damaged(offset, format!("the record claims {len} bytes, more than the {MAX_PAYLOAD} an event record may hold")));
    }
    Ok(len)
}

pub(super) fn damaged(offset: u64, message: impl Into<String>) -> Error {
    Error::EventFile { offset, message: message.into() }
}

fn u32_le(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The complete records of a stretch of a file, and where to read on.
    #[derive(Debug, PartialEq)]
    struct Records<'a> {
        payloads: Vec<Payload<'a>>,
        resume_at: u64,
    }

    fn split(bytes: &[u8], start: u64) -> Result<Records<'_>, Error> {
        let mut payloads = Vec::new();
        let resume_at = each(bytes, start, |payload| {
            payloads.push(payload);
            Ok(())
        })?;
        Ok(Records { payloads, resume_at })
    }

    fn file(payloads: &[&[u8]]) -> Vec<u8> {
        payloads.iter().flat_map(|p| frame(p)).collect()
    }

    #[test]
    fn records_frame_and_split_back() {
        let bytes = file(&[b"first", b"", b"third record"]);
        assert_eq!(bytes.len(), 3 * 16 + 5 + 12);
        assert_eq!(&bytes[..8], 5u64.to_le_bytes());
        assert_eq!(&bytes[8..12], masked_crc32c(&5u64.to_le_bytes()).to_le_bytes());
        let records = split(&bytes, 0).unwrap();
        let payloads: Vec<&[u8]> = records.payloads.iter().map(|p| p.bytes).collect();
        assert_eq!(payloads, [&b"first"[..], b"", b"third record"]);
        assert_eq!(records.payloads.iter().map(|p| p.offset).collect::<Vec<_>>(), [0, 21, 37]);
        assert_eq!(records.resume_at, bytes.len() as u64);
    }

    #[test]
    fn a_truncated_tail_is_left_for_the_next_read() {
        let bytes = file(&[b"one", b"two"]);
        // Cut inside the second record's header, payload and footer.
        for cut in [20, 19 + 5, 19 + 12 + 2, bytes.len() - 1] {
            let records = split(&bytes[..cut], 0).unwrap();
            assert_eq!(records.payloads.len(), 1, "cut at {cut}");
            assert_eq!(records.resume_at, 19);
        }
        // Reading on from there, as a follower does, finds the rest.
        let rest = split(&bytes[19..], 19).unwrap();
        assert_eq!(rest.payloads, [Payload { offset: 19, bytes: b"two" }]);
        assert_eq!(rest.resume_at, bytes.len() as u64);
        assert_eq!(split(&[], 7).unwrap(), Records { payloads: Vec::new(), resume_at: 7 });
    }

    #[test]
    fn a_stretch_is_cut_where_a_record_starts() {
        let bytes = file(&[b"one", b"two", b"three"]);
        assert_eq!(boundary_after(&bytes, 0), 0);
        assert_eq!(boundary_after(&bytes, 1), 19);
        assert_eq!(boundary_after(&bytes, 19), 19);
        assert_eq!(boundary_after(&bytes, 20), 38);
        assert_eq!(boundary_after(&bytes, 39), bytes.len());
        assert_eq!(boundary_after(&bytes[..30], 20), 30);
        let mut bogus = bytes.clone();
        bogus[19..27].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(boundary_after(&bogus, 20), bogus.len());
    }

    #[test]
    fn a_bad_checksum_names_the_byte_where_its_record_starts() {
        let mut bytes = file(&[b"one", b"two"]);
        bytes[19 + 12] ^= 1;
        let err = split(&bytes, 100).unwrap_err();
        assert_eq!(err, damaged(119, "the record's payload fails its checksum (masked CRC-32C): the event file is damaged"));
        bytes[19] ^= 1;
        let err = split(&bytes, 0).unwrap_err().to_string();
        assert!(err.starts_with("byte 19: the record's length fails its checksum"), "{err}");
        let err = split(b"name,value\n1,2\n", 0).unwrap_err().to_string();
        assert!(err.contains("not a TensorBoard event file"), "{err}");
    }

    #[test]
    fn a_length_past_the_limit_is_refused_even_with_a_good_checksum() {
        let huge = (4u64 << 30).to_le_bytes();
        let mut header = huge.to_vec();
        header.extend_from_slice(&masked_crc32c(&huge).to_le_bytes());
        let err = record_size(&header, 40).unwrap_err().to_string();
        assert!(err.starts_with("byte 40: the record claims 4294967296 bytes, more than the"), "{err}");
        let mut bytes = file(&[b"one"]);
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&[0; 100]);
        assert!(split(&bytes, 0).unwrap_err().to_string().starts_with("byte 19: the record claims"));
        assert_eq!(record_size(&file(&[b"four"]), 0).unwrap(), 20);
    }
}
