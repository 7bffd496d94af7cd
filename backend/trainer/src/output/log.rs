//! Log lines in the tutorial's format: Python logging's
//! `%(asctime)s - %(name)s - %(levelname)s - %(message)s` with the root logger, e.g.
//! `2025-06-19 17:48:55,185 - root - INFO - Time taken for epoch 1 is ...`.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use indicatif::ProgressBar;

use crate::Error;

/// Writes each line to stderr (above the progress bar when there is one) and to `out.log`.
/// Like the tutorial's rank-0 filter, a logger of any other rank stays quiet.
pub struct Logger {
    file: Mutex<Option<File>>,
    progress: Option<ProgressBar>,
    enabled: bool,
}

impl Logger {
    pub fn new(progress: Option<ProgressBar>) -> Logger {
        Logger { file: Mutex::new(None), progress, enabled: true }
    }

    /// A logger that writes nothing (ranks other than 0).
    pub fn quiet() -> Logger {
        Logger { file: Mutex::new(None), progress: None, enabled: false }
    }

    /// From now on, also append every line to `path` (the run's `out.log`).
    pub fn attach_file(&self, path: &Path) -> Result<(), Error> {
        if !self.enabled {
            return Ok(());
        }
        let file = File::options().create(true).append(true).open(path).map_err(|e| Error::io(path, e))?;
        if let Ok(mut guard) = self.file.lock() {
            *guard = Some(file);
        }
        Ok(())
    }

    pub fn info(&self, message: &str) {
        if !self.enabled {
            return;
        }
        let line = format!("{} - root - INFO - {message}", timestamp(SystemTime::now()));
        match &self.progress {
            Some(bar) => bar.println(&line),
            None => eprintln!("{line}"),
        }
        if let Ok(mut guard) = self.file.lock()
            && let Some(file) = guard.as_mut()
        {
            // A log line that cannot be written must not stop training; stderr has it.
            let _ = writeln!(file, "{line}");
        }
    }

    pub fn progress(&self) -> Option<&ProgressBar> {
        self.progress.as_ref()
    }
}

/// Python logging's `asctime`: `YYYY-MM-DD HH:MM:SS,mmm`, in UTC (the time zone of the
/// clusters' compute nodes and of this app's servers; Python would use local time).
pub fn timestamp(t: SystemTime) -> String {
    const ASCTIME: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second],[subsecond digits:3]");
    time::OffsetDateTime::from(t).format(ASCTIME).unwrap_or_default()
}

/// A float as Python's `repr` prints it (the tutorial formats some lines with `{}`):
/// shortest round-trip digits, `1.0` for whole numbers, exponent form below 1e-4 and from
/// 1e16 on with a two-digit exponent (`1e-05`, `1.5e+16`), `nan`, `inf`.
pub fn py_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_read_like_python_logging() {
        // 2025-06-19 17:48:55.185 UTC, the tutorial's first log line.
        let t = UNIX_EPOCH + Duration::from_millis(1_750_355_335_185);
        assert_eq!(timestamp(t), "2025-06-19 17:48:55,185");
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01 00:00:00,000");
        // A leap day.
        assert_eq!(timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29 00:00:00,000");
    }

    #[test]
    fn floats_print_like_python_repr() {
        assert_eq!(py_float(0.4234594404697418), "0.4234594404697418");
        assert_eq!(py_float(4.935128688812256), "4.935128688812256");
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(-3.0), "-3.0");
        assert_eq!(py_float(1e-5), "1e-05");
        assert_eq!(py_float(2.5e-7), "2.5e-07");
        assert_eq!(py_float(0.0001), "0.0001");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(f64::NAN), "nan");
        // A float32 loss widened to f64, as `tensor.item()` gives it.
        assert_eq!(py_float(f64::from(0.35156_f32)), "0.35155999660491943");
    }
}
