//! NumPy `.npy` files of float32, the format of the tutorial's statistics
//! (`global_means.npy`, `global_stds.npy`, `time_means.npy`). Files are written in format
//! version 1.0 (`<f4`, C order) so that `np.load` reads them; the reader also takes what
//! NumPy writes for float64 arrays and for large headers (versions 2 and 3).

use std::io::Read as _;
use std::path::Path;

use crate::Error;

const MAGIC: &[u8] = b"\x93NUMPY";
/// NumPy pads the header so that the data starts on a 64-byte boundary.
const ALIGN: usize = 64;

/// Writes `data` (C order) as a float32 array of `shape`.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> Result<(), Error> {
    let count: usize = shape.iter().product();
    if count != data.len() {
        return Err(Error::DataSetting(format!("{}: shape {shape:?} holds {count} values, got {}", path.display(), data.len())));
    }
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    // A 1-tuple needs its trailing comma in Python syntax.
    let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}");
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.extend(std::iter::repeat_n(' ', unpadded.next_multiple_of(ALIGN) - unpadded));
    header.push('\n');

    let mut bytes = Vec::with_capacity(MAGIC.len() + 4 + header.len() + 4 * data.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[1, 0]);
    let header_len = u16::try_from(header.len())
        .map_err(|_| Error::DataSetting(format!("{}: shape {shape:?} is too long for .npy 1.0", path.display())))?;
    bytes.extend_from_slice(&header_len.to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for value in data {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    std::fs::write(path, bytes).map_err(|err| Error::io(path, err))
}

/// Reads a float array and checks that its shape is `expected`; float64 files are narrowed.
pub fn read_f32(path: &Path, expected: &[usize]) -> Result<Vec<f32>, Error> {
    let bad = |message: String| Error::Data { path: path.to_owned(), message };
    let bytes = read_bounded(path).map_err(bad)?;
    let (header, body) = split_header(&bytes).ok_or_else(|| bad("not a NumPy .npy file".into()))?;
    let array = Header::parse(header).ok_or_else(|| bad(format!("unreadable .npy header {header:?}")))?;
    if array.fortran_order {
        return Err(bad("Fortran-ordered arrays are not supported; save it in C order".into()));
    }
    if array.shape != expected {
        return Err(bad(format!("expected an array of shape {expected:?}, found shape {:?}", array.shape)));
    }
    let count: usize = array.shape.iter().product();
    let width = match array.descr.as_str() {
        "<f4" => 4,
        "<f8" => 8,
        other => {
            return Err(bad(format!("expected little-endian float32 ('<f4'), found dtype '{other}'")));
        }
    };
    if body.len() != count * width {
        return Err(bad(format!("holds {} data bytes, shape {:?} needs {}", body.len(), array.shape, count * width)));
    }
    Ok(if width == 4 {
        body.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    } else {
        body.chunks_exact(8).map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32).collect()
    })
}

/// The most bytes a `.npy` file read here may have: the tutorial's statistics hold a few
/// numbers per channel. A larger file, or a device that never ends (`/dev/zero`), is refused
/// before it is read, so a config cannot make a rank read gigabytes.
const MAX_NPY_BYTES: u64 = scalebook_shared::config::MAX_STATS_FILE_BYTES;

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|err| format!("cannot read: {err}"))?;
    let meta = file.metadata().map_err(|err| format!("cannot read: {err}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_NPY_BYTES {
        return Err(format!("{} bytes, more than the {MAX_NPY_BYTES} a statistics file may have", meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_NPY_BYTES + 1).read_to_end(&mut bytes).map_err(|err| format!("cannot read: {err}"))?;
    Ok(bytes)
}

/// The header text and the data bytes after it, for format versions 1 to 3.
fn split_header(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (&major, rest) = rest.split_first()?;
    let (_minor, rest) = rest.split_first()?;
    let (len, rest) = match major {
        1 => {
            let (len, rest) = rest.split_first_chunk::<2>()?;
            (usize::from(u16::from_le_bytes(*len)), rest)
        }
        2 | 3 => {
            let (len, rest) = rest.split_first_chunk::<4>()?;
            (usize::try_from(u32::from_le_bytes(*len)).ok()?, rest)
        }
        _ => return None,
    };
    let (header, body) = rest.split_at_checked(len)?;
    Some((std::str::from_utf8(header).ok()?, body))
}

/// The three keys of the header's Python dict literal.
#[derive(Debug, PartialEq)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    fn parse(text: &str) -> Option<Header> {
        let descr = value_after(text, "descr")?.strip_prefix('\'')?.split('\'').next()?.to_owned();
        let fortran_order = match value_after(text, "fortran_order")? {
            v if v.starts_with("True") => true,
            v if v.starts_with("False") => false,
            _ => return None,
        };
        let tuple = value_after(text, "shape")?.strip_prefix('(')?.split(')').next()?;
        let shape =
            tuple.split(',').map(str::trim).filter(|dim| !dim.is_empty()).map(|dim| dim.parse().ok()).collect::<Option<Vec<usize>>>()?;
        Some(Header { descr, fortran_order, shape })
    }
}

/// The text after `'key':`, with leading spaces removed.
fn value_after<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let quoted = format!("'{key}'");
    let after = &text[text.find(&quoted)? + quoted.len()..];
    Some(after.trim_start().strip_prefix(':')?.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpys_header_forms() {
        let header = Header::parse("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }   \n");
        assert_eq!(header, Some(Header { descr: "<f8".into(), fortran_order: false, shape: vec![3] }));
        let scalar = Header::parse("{'descr': '<f4', 'fortran_order': True, 'shape': (), }");
        assert_eq!(scalar, Some(Header { descr: "<f4".into(), fortran_order: true, shape: vec![] }));
        assert_eq!(Header::parse("{'descr': '<f4', 'shape': (1, 2), }"), None);
    }

    #[test]
    fn written_header_is_aligned_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        let data: Vec<f32> = (0..40).map(|i| i as f32 * 0.5 - 3.0).collect();
        write_f32(&path, &[1, 20, 2, 1], &data).unwrap();

        let bytes = std::fs::read(&path).unwrap();
        let (header, body) = split_header(&bytes).unwrap();
        assert_eq!((bytes.len() - body.len()) % ALIGN, 0);
        assert!(header.ends_with('\n'));
        assert_eq!(&bytes[6..8], &[1, 0], "format version 1.0");
        assert_eq!(read_f32(&path, &[1, 20, 2, 1]).unwrap(), data);

        let err = read_f32(&path, &[1, 20, 1, 1]).unwrap_err().to_string();
        assert!(err.contains("a.npy") && err.contains("[1, 20, 1, 1]") && err.contains("[1, 20, 2, 1]"), "{err}");
    }

    #[test]
    fn devices_and_oversize_files_are_refused_unread() {
        let err = read_f32(Path::new("/dev/zero"), &[1]).unwrap_err().to_string();
        assert!(err.contains("/dev/zero") && err.contains("not a regular file"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.npy");
        std::fs::File::create(&big).unwrap().set_len(MAX_NPY_BYTES + 1).unwrap();
        let err = read_f32(&big, &[1]).unwrap_err().to_string();
        assert!(err.contains("more than the 1048576"), "{err}");
    }

    #[test]
    fn reads_float64_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.npy");
        let mut bytes = MAGIC.to_vec();
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n";
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for value in [1.5f64, -2.25] {
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_f32(&path, &[2]).unwrap(), vec![1.5, -2.25]);
    }
}
