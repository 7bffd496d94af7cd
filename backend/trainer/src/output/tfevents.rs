//! TensorBoard event files, written directly: the records come from `shared`'s encoder (one
//! framing and checksum for the whole project, the same the server and the browser read), and
//! this writer only names the file, stamps the time and appends.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use scalebook_shared::tfevents;

use crate::Error;

pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventWriter {
    /// Creates `events.out.tfevents.<secs>.<host>.<pid>.0` in `dir` (the name TensorBoard
    /// looks for) and writes the file-version record every event file starts with.
    pub fn create(dir: &Path) -> Result<EventWriter, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
        let path = dir.join(tfevents::file_name(now.as_secs(), host.trim(), std::process::id()));
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut writer = EventWriter { path, out: BufWriter::new(file) };
        writer.append(&tfevents::file_version_record(now.as_secs_f64()))?;
        writer.flush()?;
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one scalar. Call [`EventWriter::flush`] to make it visible to readers.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f32) -> Result<(), Error> {
        self.append(&tfevents::scalar_record(wall_time(), step, tag, value))
    }

    /// Appends one image (a PNG of `height` × `width` RGB pixels), as `SummaryWriter.add_image`
    /// and `add_figure` do.
    pub fn image(&mut self, tag: &str, step: u64, png: &[u8], height: u32, width: u32) -> Result<(), Error> {
        self.append(&tfevents::image_record(wall_time(), step, tag, png, height, width))
    }

    pub fn flush(&mut self) -> Result<(), Error> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))
    }

    fn append(&mut self, record: &[u8]) -> Result<(), Error> {
        self.out.write_all(record).map_err(|e| Error::io(&self.path, e))
    }
}

fn wall_time() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}
