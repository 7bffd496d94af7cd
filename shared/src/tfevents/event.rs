//! The `Event` protocol buffer, decoded as far as charts need: its time, step and file
//! version, and each summary value's tag with its scalar or its image's size.
//!
//! Scalars come in two forms. PyTorch's `SummaryWriter` (and this project's trainer) write
//! `Summary.Value.simple_value`; TensorFlow 2 and `tensorboard.summary` v2 write a tensor with
//! the `scalars` plugin's metadata: a one-element `DT_FLOAT` or `DT_DOUBLE` tensor, its value
//! in `float_val`, `double_val` or the raw `tensor_content`. Images too: `Summary.Value.image`
//! (PyTorch), or a string tensor `[width, height, png, ...]` of the `images` plugin.

use std::borrow::Cow;

use super::wire::{Field, Fields};

/// `Event` fields.
const EVENT_WALL_TIME: u32 = 1;
const EVENT_STEP: u32 = 2;
const EVENT_FILE_VERSION: u32 = 3;
const EVENT_SUMMARY: u32 = 5;
/// `Summary.value`.
const SUMMARY_VALUE: u32 = 1;
/// `Summary.Value` fields.
const VALUE_TAG: u32 = 1;
const VALUE_SIMPLE: u32 = 2;
const VALUE_IMAGE: u32 = 4;
const VALUE_TENSOR: u32 = 8;
const VALUE_METADATA: u32 = 9;
/// `SummaryMetadata.plugin_data` and `PluginData.plugin_name`.
const METADATA_PLUGIN_DATA: u32 = 1;
const PLUGIN_NAME: u32 = 1;
/// `Summary.Image` fields.
const IMAGE_HEIGHT: u32 = 1;
const IMAGE_WIDTH: u32 = 2;
const IMAGE_COLORSPACE: u32 = 3;
const IMAGE_ENCODED: u32 = 4;
/// `TensorProto` fields.
const TENSOR_DTYPE: u32 = 1;
const TENSOR_SHAPE: u32 = 2;
const TENSOR_CONTENT: u32 = 4;
const TENSOR_FLOAT_VAL: u32 = 5;
const TENSOR_DOUBLE_VAL: u32 = 6;
const TENSOR_STRING_VAL: u32 = 8;
/// `TensorShapeProto.dim` and `Dim.size`.
const SHAPE_DIM: u32 = 2;
const DIM_SIZE: u32 = 1;
/// TensorFlow's `DataType` values.
const DT_FLOAT: u64 = 1;
const DT_DOUBLE: u64 = 2;
const DT_STRING: u64 = 7;

/// The plugins whose tensors this reader understands.
const SCALARS_PLUGIN: &[u8] = b"scalars";
const IMAGES_PLUGIN: &[u8] = b"images";

/// One decoded event, owning its tags (see [`EventView`] for one that borrows them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    pub step: i64,
    /// Set only on the record every event file starts with (`brain.Event:2`).
    pub file_version: Option<String>,
    pub values: Vec<Value>,
}

/// One `Summary.Value`: a tag and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub tag: String,
    pub data: Data,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Data {
    Scalar(f64),
    Image(Image),
    /// A histogram, audio, text, or any other plugin's data: listed by tag, not read.
    Other,
}

/// An image's size; its pixels stay in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub height: u32,
    pub width: u32,
    /// Channels (1 grey, 3 RGB, 4 RGBA); 0 when the file does not say.
    pub colorspace: u32,
    /// The encoded image's length in bytes.
    pub encoded_bytes: usize,
}

/// One decoded event borrowing its record's bytes: what a reader that copies millions of
/// scalars out needs, with nothing allocated per event (its list of values is reused).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventView<'a> {
    pub wall_time: f64,
    pub step: i64,
    pub file_version: Option<&'a [u8]>,
    pub values: Vec<ValueView<'a>>,
}

/// One `Summary.Value`, its tag borrowed (copied only when it is not valid UTF-8).
#[derive(Debug, Clone, PartialEq)]
pub struct ValueView<'a> {
    pub tag: Cow<'a, str>,
    pub data: Data,
}

pub(super) type Decoded<T> = Result<T, &'static str>;

impl Event {
    /// Decodes one record's payload.
    pub fn decode(payload: &[u8]) -> Decoded<Event> {
        let mut view = EventView::default();
        view.decode(payload)?;
        Ok(view.to_owned())
    }
}

impl<'a> EventView<'a> {
    /// Decodes one record's payload into `self`, keeping the capacity of its list of values.
    pub fn decode(&mut self, payload: &'a [u8]) -> Decoded<()> {
        self.wall_time = 0.0;
        self.step = 0;
        self.file_version = None;
        self.values.clear();
        for field in Fields::new(payload) {
            match field? {
                (EVENT_WALL_TIME, f) => self.wall_time = f.double().ok_or("Event.wall_time is not a double")?,
                (EVENT_STEP, f) => self.step = f.varint().ok_or("Event.step is not a varint")? as i64,
                (EVENT_FILE_VERSION, f) => self.file_version = Some(f.bytes().ok_or("Event.file_version is not a string")?),
                (EVENT_SUMMARY, f) => {
                    for field in Fields::new(f.bytes().ok_or("Event.summary is not a message")?) {
                        if let (SUMMARY_VALUE, f) = field? {
                            self.values.push(ValueView::decode(f.bytes().ok_or("Summary.value is not a message")?)?);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The event with its own copies of its tags.
    pub fn to_owned(&self) -> Event {
        Event {
            wall_time: self.wall_time,
            step: self.step,
            file_version: self.file_version.map(|v| String::from_utf8_lossy(v).into_owned()),
            values: self.values.iter().map(|v| Value { tag: v.tag.clone().into_owned(), data: v.data }).collect(),
        }
    }
}

impl<'a> ValueView<'a> {
    fn decode(bytes: &'a [u8]) -> Decoded<ValueView<'a>> {
        let mut tag = Cow::Borrowed("");
        let (mut simple, mut image, mut tensor, mut plugin) = (None, None, None, None);
        for field in Fields::new(bytes) {
            match field? {
                (VALUE_TAG, f) => tag = String::from_utf8_lossy(f.bytes().ok_or("Summary.Value.tag is not a string")?),
                (VALUE_SIMPLE, f) => simple = Some(f.float().ok_or("Summary.Value.simple_value is not a float")?),
                (VALUE_IMAGE, f) => image = Some(decode_image(f.bytes().ok_or("Summary.Value.image is not a message")?)?),
                (VALUE_TENSOR, f) => tensor = Some(Tensor::decode(f.bytes().ok_or("Summary.Value.tensor is not a message")?)?),
                (VALUE_METADATA, f) => plugin = plugin_name(f.bytes().ok_or("Summary.Value.metadata is not a message")?)?,
                _ => {}
            }
        }
        let data = match (simple, image, tensor) {
            (Some(v), _, _) => Data::Scalar(widen(v)),
            (_, Some(image), _) => Data::Image(image),
            (_, _, Some(tensor)) => tensor.data(plugin),
            _ => Data::Other,
        };
        Ok(ValueView { tag, data })
    }
}

/// `SummaryMetadata.plugin_data.plugin_name`, when there is one.
fn plugin_name(metadata: &[u8]) -> Decoded<Option<&[u8]>> {
    let mut name = None;
    for field in Fields::new(metadata) {
        if let (METADATA_PLUGIN_DATA, f) = field? {
            for field in Fields::new(f.bytes().ok_or("SummaryMetadata.plugin_data is not a message")?) {
                if let (PLUGIN_NAME, f) = field? {
                    name = Some(f.bytes().ok_or("PluginData.plugin_name is not a string")?);
                }
            }
        }
    }
    Ok(name)
}

fn decode_image(bytes: &[u8]) -> Decoded<Image> {
    let mut image = Image { height: 0, width: 0, colorspace: 0, encoded_bytes: 0 };
    for field in Fields::new(bytes) {
        match field? {
            (IMAGE_HEIGHT, f) => image.height = f.varint().ok_or("Summary.Image.height is not a varint")? as u32,
            (IMAGE_WIDTH, f) => image.width = f.varint().ok_or("Summary.Image.width is not a varint")? as u32,
            (IMAGE_COLORSPACE, f) => image.colorspace = f.varint().ok_or("Summary.Image.colorspace is not a varint")? as u32,
            (IMAGE_ENCODED, f) => image.encoded_bytes = f.bytes().ok_or("Summary.Image.encoded_image_string is not bytes")?.len(),
            _ => {}
        }
    }
    Ok(image)
}

/// The parts of a `TensorProto` a scalar or an image summary uses.
#[derive(Default)]
struct Tensor<'a> {
    dtype: u64,
    /// The product of the dimensions (1 for a scalar, whose shape has none).
    elements: u64,
    content: &'a [u8],
    floats: Vec<f32>,
    doubles: Vec<f64>,
    strings: Vec<&'a [u8]>,
}

impl<'a> Tensor<'a> {
    fn decode(bytes: &'a [u8]) -> Decoded<Tensor<'a>> {
        let mut tensor = Tensor { elements: 1, ..Tensor::default() };
        for field in Fields::new(bytes) {
            match field? {
                (TENSOR_DTYPE, f) => tensor.dtype = f.varint().ok_or("TensorProto.dtype is not a varint")?,
                (TENSOR_SHAPE, f) => tensor.elements = elements(f.bytes().ok_or("TensorProto.tensor_shape is not a message")?)?,
                (TENSOR_CONTENT, f) => tensor.content = f.bytes().ok_or("TensorProto.tensor_content is not bytes")?,
                // Repeated numbers: packed (one length-delimited field) or one field each.
                (TENSOR_FLOAT_VAL, Field::Bytes(packed)) => {
                    tensor.floats.extend(packed.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                }
                (TENSOR_FLOAT_VAL, f) => tensor.floats.push(f.float().ok_or("TensorProto.float_val is not a float")?),
                (TENSOR_DOUBLE_VAL, Field::Bytes(packed)) => tensor.doubles.extend(packed.chunks_exact(8).map(|b| {
                    let mut le = [0u8; 8];
                    le.copy_from_slice(b);
                    f64::from_le_bytes(le)
                })),
                (TENSOR_DOUBLE_VAL, f) => tensor.doubles.push(f.double().ok_or("TensorProto.double_val is not a double")?),
                (TENSOR_STRING_VAL, f) => tensor.strings.push(f.bytes().ok_or("TensorProto.string_val is not bytes")?),
                _ => {}
            }
        }
        Ok(tensor)
    }

    /// What the tensor stands for. A one-element float tensor is a scalar unless another
    /// plugin claims it: TensorFlow writes a tag's plugin metadata with its first value only.
    fn data(&self, plugin: Option<&[u8]>) -> Data {
        match (plugin, self.dtype) {
            (None | Some(SCALARS_PLUGIN), DT_FLOAT | DT_DOUBLE) if self.elements == 1 => self.scalar().map_or(Data::Other, Data::Scalar),
            (Some(IMAGES_PLUGIN), DT_STRING) => self.image().map_or(Data::Other, Data::Image),
            _ => Data::Other,
        }
    }

    fn scalar(&self) -> Option<f64> {
        let from_content = match (self.dtype, self.content.len()) {
            (DT_FLOAT, 4) => Some(widen(f32::from_le_bytes(self.content.try_into().ok()?))),
            (DT_DOUBLE, 8) => Some(f64::from_le_bytes(self.content.try_into().ok()?)),
            _ => None,
        };
        match self.dtype {
            DT_FLOAT => self.floats.first().map(|&v| widen(v)).or(from_content),
            _ => self.doubles.first().copied().or(from_content),
        }
    }

    /// The images plugin's `[width, height, encoded image, ...]`: the first image's size.
    fn image(&self) -> Option<Image> {
        let number = |bytes: &[u8]| std::str::from_utf8(bytes).ok()?.trim().parse::<u32>().ok();
        let [width, height, encoded, ..] = self.strings.as_slice() else { return None };
        Some(Image { height: number(height)?, width: number(width)?, colorspace: 0, encoded_bytes: encoded.len() })
    }
}

/// A float32 scalar as the decimal it was written as: the f64 of its shortest round-trip
/// decimal (`0.1f32` reads as 0.1, not 0.10000000149011612), which is what TensorBoard shows
/// and what a CSV export or a read-out should say.
fn widen(v: f32) -> f64 {
    if !v.is_finite() {
        return f64::from(v);
    }
    zmij::Buffer::new().format_finite(v).parse().unwrap_or(f64::from(v))
}

/// The number of elements of a `TensorShapeProto`.
fn elements(shape: &[u8]) -> Decoded<u64> {
    let mut elements = 1u64;
    for field in Fields::new(shape) {
        if let (SHAPE_DIM, f) = field? {
            // An absent size is proto3's default, 0.
            let mut size = 0;
            for field in Fields::new(f.bytes().ok_or("TensorShapeProto.dim is not a message")?) {
                if let (DIM_SIZE, f) = field? {
                    size = f.varint().ok_or("Dim.size is not a varint")?;
                }
            }
            elements = elements.saturating_mul(size);
        }
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_float32_widens_to_the_decimal_it_prints_as() {
        // Across the exponents, subnormals and the largest finite value: the f64 of the
        // shortest decimal that reads back as the same f32.
        for bits in (1..0x7f80_0000u32).step_by(9_973).chain([0x7f7f_ffff, (41.0f32 + 5.0 / 128.0).to_bits()]) {
            let v = f32::from_bits(bits);
            let expected: f64 = v.to_string().parse().unwrap();
            let widened = widen(v);
            // Where two decimals as short are as near (41.0390625 is 41.039062 or 41.039063),
            // either is the decimal it was written as.
            let exact = f64::from(v);
            assert!(widened == expected || (widened - exact).abs() == (expected - exact).abs(), "{v:e}: {widened} for {expected}");
            assert_eq!(widened as f32, v, "{v:e}");
            assert_eq!(widen(-v), -widened);
        }
        assert_eq!(widen(0.1), 0.1);
        assert_eq!(widen(f32::MAX), 3.4028235e38);
        assert!(widen(f32::NAN).is_nan());
        assert_eq!(widen(f32::NEG_INFINITY), f64::NEG_INFINITY);
    }
}
