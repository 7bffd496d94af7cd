//! TensorBoard event files, read and written without I/O, so the browser (a dropped file, the
//! baseline), the server (importing and following a logdir) and the trainer (its writer) share
//! one implementation of the format: TFRecord framing with masked CRC-32C (`record`), the
//! protocol-buffer wire format (`wire`), `Event` decoding (`event`) and encoding (`encode`).
//!
//! Reading works on a stretch of a file that may end inside a record, as a file still being
//! written does: [`read`] returns the events of the complete records and where to read on.

mod crc;
mod encode;
mod event;
mod record;
mod wire;

pub use crc::masked_crc32c;
pub use encode::{FILE_VERSION, file_version_record, image_record, scalar_record};
pub use event::{Data, Event, EventView, Image, Value, ValueView};
pub use record::{HEADER, MAX_PAYLOAD, boundary_after, record_size};

use crate::Error;
use crate::metrics::MetricPoint;

/// How event files are named: TensorBoard reads the files of a directory whose names start so.
pub const FILE_PREFIX: &str = "events.out.tfevents.";

/// Whether a file of this name is an event file by TensorBoard's naming.
pub fn is_event_file(name: &str) -> bool {
    name.starts_with(FILE_PREFIX)
}

/// The name a writer gives a new event file: `events.out.tfevents.<secs>.<host>.<pid>.0`, so
/// the files of one run sort in the order they were started.
pub fn file_name(secs: u64, host: &str, pid: u32) -> String {
    format!("{FILE_PREFIX}{secs}.{host}.{pid}.0")
}

/// What one read of a stretch of an event file found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contents {
    pub events: Vec<Event>,
    /// The byte offset in the file where the next read should start: the end of the last
    /// complete record.
    pub resume_at: u64,
}

/// An image summary, listed (its pixels are not decoded).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageEntry {
    pub tag: String,
    pub step: i64,
    pub wall_time: f64,
    pub image: Image,
}

/// Reads the complete records of `bytes`, which start at byte `start` of their file. A
/// damaged record, or one that is not an `Event`, is an error naming its byte offset.
pub fn read(bytes: &[u8], start: u64) -> Result<Contents, Error> {
    let mut events = Vec::new();
    let resume_at = visit(bytes, start, |event| events.push(event.to_owned()))?;
    Ok(Contents { events, resume_at })
}

/// Calls `each` with every event of the complete records of `bytes` (which start at byte
/// `start` of their file), borrowing the bytes, and returns where the next read should start.
/// A damaged record, or one that is not an `Event`, is an error naming its byte offset, once
/// the events before it have been visited.
pub fn visit<'a>(bytes: &'a [u8], start: u64, mut each: impl FnMut(&EventView<'a>)) -> Result<u64, Error> {
    let mut event = EventView::default();
    record::each(bytes, start, |payload| {
        event
            .decode(payload.bytes)
            .map_err(|why| record::damaged(payload.offset, format!("the record is not a TensorBoard event: {why}")))?;
        each(&event);
        Ok(())
    })
}

impl Contents {
    /// Every scalar, in file order, as a metric point (epoch 0: event files have no epochs; a
    /// negative step counts as 0).
    pub fn points(&self) -> Vec<MetricPoint> {
        self.values()
            .filter_map(|(event, value)| match value.data {
                Data::Scalar(v) => Some(MetricPoint {
                    step: u64::try_from(event.step).unwrap_or(0),
                    epoch: 0,
                    wall: event.wall_time,
                    tag: value.tag.clone(),
                    value: v,
                }),
                _ => None,
            })
            .collect()
    }

    /// Every image summary, in file order.
    pub fn images(&self) -> Vec<ImageEntry> {
        self.values()
            .filter_map(|(event, value)| match value.data {
                Data::Image(image) => Some(ImageEntry { tag: value.tag.clone(), step: event.step, wall_time: event.wall_time, image }),
                _ => None,
            })
            .collect()
    }

    fn values(&self) -> impl Iterator<Item = (&Event, &Value)> {
        self.events.iter().flat_map(|event| event.values.iter().map(move |value| (event, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::wire::{put_bytes, put_double, put_float, put_varint_field};
    use super::*;

    /// `Summary.Value` of a TF2 scalar: a tensor with the scalars plugin's metadata.
    fn tensor_value(tag: &str, plugin: Option<&str>, tensor: &[u8]) -> Vec<u8> {
        let mut value = Vec::new();
        put_bytes(&mut value, 1, tag.as_bytes());
        if let Some(plugin) = plugin {
            let mut plugin_data = Vec::new();
            put_bytes(&mut plugin_data, 1, plugin.as_bytes());
            let mut metadata = Vec::new();
            put_bytes(&mut metadata, 1, &plugin_data);
            put_varint_field(&mut metadata, 4, 1);
            put_bytes(&mut value, 9, &metadata);
        }
        put_bytes(&mut value, 8, tensor);
        value
    }

    fn event_record(wall: f64, step: u64, values: &[Vec<u8>]) -> Vec<u8> {
        let mut summary = Vec::new();
        for v in values {
            put_bytes(&mut summary, 1, v);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall);
        put_varint_field(&mut event, 2, step);
        put_bytes(&mut event, 5, &summary);
        // Fields this reader does not know (a graph, a log message) are skipped.
        put_bytes(&mut event, 4, b"graph bytes");
        put_varint_field(&mut event, 99, 7);
        record::frame(&event)
    }

    fn tensor(dtype: u64, shape: &[u64], fill: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut t = Vec::new();
        put_varint_field(&mut t, 1, dtype);
        let mut dims = Vec::new();
        for &size in shape {
            let mut dim = Vec::new();
            put_varint_field(&mut dim, 1, size);
            put_bytes(&mut dims, 2, &dim);
        }
        put_bytes(&mut t, 2, &dims);
        fill(&mut t);
        t
    }

    fn values(contents: &Contents) -> Vec<(u64, String, f64)> {
        contents.points().into_iter().map(|p| (p.step, p.tag, p.value)).collect()
    }

    #[test]
    fn our_encoder_reads_back() {
        let mut file = file_version_record(1000.0);
        file.extend(scalar_record(1001.5, 10, "Loss/train", 0.5));
        file.extend(image_record(1002.0, 10, "Visualization, t2m", &[0x89, b'P', b'N', b'G'], 90, 180));
        file.extend(scalar_record(1003.0, 20, "Loss/train", 0.1));
        let contents = read(&file, 0).unwrap();
        assert_eq!(contents.resume_at, file.len() as u64);
        assert_eq!(contents.events[0].file_version.as_deref(), Some(FILE_VERSION));
        assert_eq!(contents.events[0].wall_time, 1000.0);
        let points = contents.points();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0], MetricPoint { step: 10, epoch: 0, wall: 1001.5, tag: "Loss/train".into(), value: 0.5 });
        // A float32 reads back as the decimal it was written as.
        assert_eq!((points[1].step, points[1].value), (20, 0.1));
        let images = contents.images();
        assert_eq!(images.len(), 1);
        assert_eq!((images[0].tag.as_str(), images[0].step, images[0].wall_time), ("Visualization, t2m", 10, 1002.0));
        assert_eq!(images[0].image, Image { height: 90, width: 180, colorspace: 3, encoded_bytes: 4 });
    }

    #[test]
    fn tensor_scalars_read_in_every_encoding() {
        let mut file = Vec::new();
        let packed_float = tensor(1, &[], |t| put_bytes(t, 5, &0.75f32.to_le_bytes()));
        let single_float = tensor(1, &[], |t| put_float(t, 5, 1.5));
        let packed_double = tensor(2, &[], |t| put_bytes(t, 6, &0.1f64.to_le_bytes()));
        let content_float = tensor(1, &[], |t| put_bytes(t, 4, &2.5f32.to_le_bytes()));
        let content_double = tensor(2, &[1], |t| put_bytes(t, 4, &(1.0f64 / 3.0).to_le_bytes()));
        file.extend(event_record(1.0, 1, &[tensor_value("a", Some("scalars"), &packed_float)]));
        // TensorFlow writes a tag's metadata with its first value only.
        file.extend(event_record(2.0, 2, &[tensor_value("a", None, &single_float)]));
        file.extend(event_record(3.0, 3, &[tensor_value("b", Some("scalars"), &packed_double)]));
        file.extend(event_record(4.0, 4, &[tensor_value("c", Some("scalars"), &content_float), tensor_value("d", None, &content_double)]));
        let contents = read(&file, 0).unwrap();
        assert_eq!(
            values(&contents),
            [(1, "a".into(), 0.75), (2, "a".into(), 1.5), (3, "b".into(), 0.1), (4, "c".into(), 2.5), (4, "d".into(), 1.0 / 3.0)]
        );
    }

    #[test]
    fn tensors_that_are_not_scalars_are_listed_but_not_charted() {
        let histogram = tensor(2, &[30, 3], |t| put_bytes(t, 4, &[0; 720]));
        let text = tensor(7, &[], |t| put_bytes(t, 8, b"hello"));
        let other_plugin = tensor(1, &[], |t| put_float(t, 5, 1.0));
        let image = tensor(7, &[3], |t| {
            put_bytes(t, 8, b"180");
            put_bytes(t, 8, b"90");
            put_bytes(t, 8, b"png bytes");
        });
        let file = event_record(
            1.0,
            5,
            &[
                tensor_value("h", Some("histograms"), &histogram),
                tensor_value("t", Some("text"), &text),
                tensor_value("p", Some("pr_curves"), &other_plugin),
                tensor_value("i", Some("images"), &image),
            ],
        );
        let contents = read(&file, 0).unwrap();
        assert!(contents.points().is_empty());
        let data: Vec<&Data> = contents.events[0].values.iter().map(|v| &v.data).collect();
        let listed = Data::Image(Image { height: 90, width: 180, colorspace: 0, encoded_bytes: 9 });
        assert_eq!(data, [&Data::Other, &Data::Other, &Data::Other, &listed]);
    }

    #[test]
    fn a_file_being_written_reads_up_to_its_last_complete_record() {
        let mut file = file_version_record(1.0);
        file.extend(scalar_record(2.0, 1, "x", 1.0));
        let whole = file.len();
        file.extend(scalar_record(3.0, 2, "x", 2.0));
        let cut = &file[..file.len() - 3];
        let first = read(cut, 0).unwrap();
        assert_eq!(values(&first), [(1, "x".into(), 1.0)]);
        assert_eq!(first.resume_at, whole as u64);
        let rest = read(&file[whole..], first.resume_at).unwrap();
        assert_eq!(values(&rest), [(2, "x".into(), 2.0)]);
        assert_eq!(rest.resume_at, file.len() as u64);
    }

    #[test]
    fn damage_is_an_error_at_its_byte() {
        let mut file = file_version_record(1.0);
        let second = file.len();
        file.extend(scalar_record(2.0, 1, "x", 1.0));
        let last = file.len() - 1;
        file[last] ^= 0xff;
        let err = read(&file, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("byte {second}: the record's payload fails its checksum (masked CRC-32C): the event file is damaged")
        );
        assert_eq!(err.problems().0[0].field, "event file");
        // A record whose checksums hold but whose payload is not an Event.
        let err = read(&record::frame(&[0x0b]), 0).unwrap_err();
        assert_eq!(err.to_string(), "byte 0: the record is not a TensorBoard event: a group has no end");
    }

    #[test]
    fn a_visit_sees_the_events_before_the_damage_then_names_its_byte() {
        let mut file = file_version_record(1.0);
        file.extend(scalar_record(2.0, 1, "Loss/train", 0.5));
        let damaged_at = file.len();
        file.extend(scalar_record(3.0, 2, "Loss/train", 0.25));
        file[damaged_at + 13] ^= 0xff;
        let mut seen = Vec::new();
        let err = visit(&file, 100, |event| seen.push(event.to_owned())).unwrap_err();
        assert!(err.to_string().starts_with(&format!("byte {}: the record's payload fails", 100 + damaged_at)), "{err}");
        assert_eq!(seen, read(&file[..damaged_at], 100).unwrap().events);
        assert_eq!((seen[1].step, seen[1].values[0].tag.as_str()), (1, "Loss/train"));
        // The view borrows the file's bytes: its tag is not a copy.
        visit(&file[..damaged_at], 0, |event| {
            if let Some(value) = event.values.first() {
                assert!(matches!(value.tag, std::borrow::Cow::Borrowed("Loss/train")));
            }
        })
        .unwrap();
    }

    #[test]
    fn names_follow_tensorboards_convention() {
        let name = file_name(1_700_000_000, "nid001", 42);
        assert_eq!(name, "events.out.tfevents.1700000000.nid001.42.0");
        assert!(is_event_file(&name));
        assert!(!is_event_file("metrics.jsonl") && !is_event_file("events.out.tfevent"));
    }
}
