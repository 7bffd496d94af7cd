//! The `profile` window: libtorch's profiler records the chosen steps on every rank (from the
//! first step's data wait to the last step's optimizer update) and each rank saves its Chrome
//! trace in the run's profile directory.

use std::path::PathBuf;

use scalebook_shared::Problems;
use scalebook_shared::config::TrainConfig;
use scalebook_shared::profile::{StepWindow, trace_file};
use scalebook_shared::rundir;
use tch::Device;

use crate::Error;
use crate::ffi::Recording;
use crate::output::Logger;

pub struct StepProfile {
    window: Option<StepWindow>,
    path: PathBuf,
    cuda: bool,
    recording: Option<Recording>,
}

impl StepProfile {
    /// The config's window for this rank; no window records nothing.
    pub fn new(config: &TrainConfig, run_dir: &std::path::Path, rank: usize, device: Device) -> Result<StepProfile, Error> {
        let window = StepWindow::parse(&config.profile).map_err(|rule| {
            let mut problems = Problems::default();
            problems.push("profile", rule);
            Error::Config(scalebook_shared::Error::Invalid(problems))
        })?;
        let path = run_dir.join(rundir::PROFILE_DIR).join(trace_file(rank));
        Ok(StepProfile { window, path, cuda: device.is_cuda(), recording: None })
    }

    /// Before step `step` (its data wait included): starts recording at the window's start.
    pub fn before(&mut self, step: u64) -> Result<(), Error> {
        if let Some(window) = self.window
            && self.recording.is_none()
            && window.contains(step as usize)
        {
            self.recording = Some(Recording::start(self.cuda)?);
        }
        Ok(())
    }

    /// After step `step`: saves the trace once the window's last step is done.
    pub fn after(&mut self, step: u64, log: &Logger) -> Result<(), Error> {
        match self.window {
            Some(window) if step as usize + 1 >= window.end => self.save(log),
            _ => Ok(()),
        }
    }

    /// Saves what was recorded, if anything (a run that ends inside its window).
    pub fn save(&mut self, log: &Logger) -> Result<(), Error> {
        let Some(recording) = self.recording.take() else { return Ok(()) };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        recording.save(&self.path)?;
        log.info(&format!("Profile of steps {} saved to {}", self.window.map(|w| w.to_string()).unwrap_or_default(), self.path.display()));
        Ok(())
    }
}
