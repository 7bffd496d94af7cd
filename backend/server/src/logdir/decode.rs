//! A stretch of an event file turned into the lines of `metrics.jsonl` it adds: cut where
//! records start into as many parts as there are cores (at most [`MAX_THREADS`]), each part
//! checked, decoded and written as lines on a thread of its own, the parts joined in order. An
//! import of a large file takes a core each for the decoding, as long as the disk keeps up.

use std::collections::BTreeSet;

use scalebook_shared::metrics::MetricPoint;
use scalebook_shared::tfevents::{self, Data};

/// Threads one stretch is decoded on, at most.
const MAX_THREADS: usize = 4;
/// A stretch shorter than this is decoded on the calling thread.
const SPLIT_BYTES: usize = 256 << 10;

/// What the records of a stretch held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// The scalars' lines, in file order.
    pub lines: Vec<u8>,
    pub points: usize,
    pub tags: BTreeSet<String>,
    /// Image summaries (listed, not copied).
    pub images: usize,
    /// The earliest and latest finite wall times of its events.
    pub first_wall: Option<f64>,
    pub last_wall: Option<f64>,
}

impl Decoded {
    /// Adds what a later stretch held.
    pub fn append(&mut self, later: Decoded) {
        if self.lines.is_empty() {
            self.lines = later.lines;
        } else {
            self.lines.extend_from_slice(&later.lines);
        }
        self.points += later.points;
        self.tags.extend(later.tags);
        self.images += later.images;
        self.first_wall = self.first_wall.into_iter().chain(later.first_wall).reduce(f64::min);
        self.last_wall = self.last_wall.into_iter().chain(later.last_wall).reduce(f64::max);
    }
}

/// Decodes the complete records of `bytes` (which start at byte `start` of their file): what
/// they held, and where the next read starts, or the damage that stopped the stretch (what
/// came before the damage is in the result).
pub fn decode(bytes: &[u8], start: u64) -> (Decoded, Result<u64, scalebook_shared::Error>) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS);
    let parts = (bytes.len() / SPLIT_BYTES).clamp(1, threads);
    let mut cuts = vec![0];
    for part in 1..parts {
        let cut = tfevents::boundary_after(bytes, bytes.len() * part / parts).max(*cuts.last().unwrap_or(&0));
        cuts.push(cut);
    }
    cuts.push(bytes.len());
    let stretches: Vec<(&[u8], u64)> = cuts.windows(2).map(|w| (&bytes[w[0]..w[1]], start + w[0] as u64)).collect();
    let results: Vec<(Decoded, Result<u64, scalebook_shared::Error>)> = match stretches.as_slice() {
        [(bytes, start)] => vec![decode_part(bytes, *start)],
        _ => std::thread::scope(|scope| {
            let handles: Vec<_> = stretches.iter().map(|&(bytes, start)| scope.spawn(move || decode_part(bytes, start))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| (Decoded::default(), Ok(start)))).collect()
        }),
    };
    let mut all = Decoded::default();
    let mut resume = Ok(start);
    for ((decoded, read), (bytes, part_start)) in results.into_iter().zip(&stretches) {
        all.append(decoded);
        match read {
            // A record that runs past its part (one longer than the stretch) is where the next
            // read starts: the parts after it hold nothing, and never say where to go on.
            Ok(at) if at < part_start + bytes.len() as u64 => return (all, Ok(at)),
            Ok(at) => resume = Ok(at),
            Err(e) => return (all, Err(e)),
        }
    }
    (all, resume)
}

/// One part, on the calling thread.
fn decode_part(bytes: &[u8], start: u64) -> (Decoded, Result<u64, scalebook_shared::Error>) {
    // A line is about twice its record: room for them all at once.
    let mut decoded = Decoded { lines: Vec::with_capacity(bytes.len() * 2), ..Decoded::default() };
    // One point whose tag's capacity is reused for each line.
    let mut point = MetricPoint { step: 0, epoch: 0, wall: 0.0, tag: String::new(), value: 0.0 };
    let read = tfevents::visit(bytes, start, |event| {
        // A NaN or infinite time (a broken writer) says nothing of when the run was: skipped.
        if event.wall_time.is_finite() {
            decoded.first_wall = Some(decoded.first_wall.map_or(event.wall_time, |w| w.min(event.wall_time)));
            decoded.last_wall = Some(decoded.last_wall.map_or(event.wall_time, |w| w.max(event.wall_time)));
        }
        for value in &event.values {
            match value.data {
                Data::Scalar(v) => {
                    point.step = u64::try_from(event.step).unwrap_or(0);
                    point.wall = event.wall_time;
                    point.value = v;
                    point.tag.clear();
                    point.tag.push_str(&value.tag);
                    if !decoded.tags.contains(&point.tag) {
                        decoded.tags.insert(point.tag.clone());
                    }
                    point.write_line(&mut decoded.lines);
                    decoded.points += 1;
                }
                Data::Image(_) => decoded.images += 1,
                Data::Other => {}
            }
        }
    });
    (decoded, read)
}

#[cfg(test)]
mod tests {
    use scalebook_shared::tfevents::{file_version_record, image_record, scalar_record};

    use super::*;

    #[test]
    fn parts_decoded_apart_join_as_one() {
        let mut file = file_version_record(100.0);
        for step in 0..40_000u64 {
            file.extend(scalar_record(100.0 + step as f64, step, if step % 2 == 0 { "a" } else { "b" }, step as f32));
        }
        assert!(file.len() > 2 * SPLIT_BYTES);
        let (decoded, read) = decode(&file, 1000);
        assert_eq!(read.unwrap(), 1000 + file.len() as u64);
        assert_eq!((decoded.points, decoded.tags.len(), decoded.first_wall, decoded.last_wall), (40_000, 2, Some(100.0), Some(40_099.0)));
        let steps: Vec<u64> = decoded
            .lines
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice::<MetricPoint>(l).unwrap().step)
            .collect();
        assert_eq!(steps, (0..40_000).collect::<Vec<_>>());
        // Damage in a later part: everything before it, and the byte it starts at.
        let last = scalar_record(40_099.0, 39_999, "b", 39_999.0).len();
        let damaged_at = file.len() - 200 * last;
        let mut bad = file.clone();
        bad[damaged_at + 14] ^= 0xff;
        let (before, read) = decode(&bad, 0);
        let err = read.unwrap_err().to_string();
        assert!(err.starts_with(&format!("byte {damaged_at}:")), "{err}");
        assert_eq!(before.points, 40_000 - 200);
        // A record cut short at the end waits for the next read.
        let (cut, read) = decode(&file[..file.len() - 3], 0);
        assert_eq!((cut.points, read.unwrap()), (39_999, (file.len() - last) as u64));
    }

    #[test]
    fn a_record_longer_than_the_stretch_is_where_the_next_read_starts() {
        let mut file = file_version_record(100.0);
        file.extend(scalar_record(101.0, 1, "a", 1.0));
        let long_starts = file.len();
        file.extend(image_record(102.0, 2, "map", &vec![7; 4 * SPLIT_BYTES], 360, 720));
        // The stretch ends inside the long record, past where the parts would be cut.
        let (decoded, read) = decode(&file[..3 * SPLIT_BYTES], 0);
        assert_eq!((decoded.points, read.unwrap()), (1, long_starts as u64));
        // Read whole, it is read.
        let (decoded, read) = decode(&file, 0);
        assert_eq!((decoded.points, decoded.images, read.unwrap()), (1, 1, file.len() as u64));
    }
}
