//! The synthetic dataset in the tutorial's on-disk format, for machines without the ERA5
//! extract: `train/<year>.h5` (one file per year), `valid/<year>.h5` and `test/<year>.h5`
//! (one later year each), each with `fields` float32 (T, 20, H, W) chunked one time step per
//! chunk, and `stats/` with the per-channel means and deviations and the time mean, computed
//! from the training years. The same arguments give the same bytes.

mod planet;
mod weather;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, sync_channel};

use ndarray::{ArrayView4, s};

use super::FIELDS;
use super::npy;
use crate::Error;
use planet::Planet;
use weather::{CHANNELS, Year};

/// The first training year's file name; validation and test follow the training years.
pub const FIRST_YEAR: u64 = 1990;

/// The smallest grid and year the generator makes (winds need neighbours; a sample needs a
/// next step).
const MIN_SIDE: usize = 4;
const MIN_STEPS: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    pub years: usize,
    pub steps_per_year: usize,
    pub height: usize,
    pub width: usize,
    pub seed: u64,
}

/// Sized for the CPU configs (`cpu_short` crops 90 × 180 and reads 256 training samples).
impl Default for SynthConfig {
    fn default() -> SynthConfig {
        SynthConfig { years: 2, steps_per_year: 256, height: 90, width: 180, seed: 0 }
    }
}

impl SynthConfig {
    /// Every setting out of range, in one message.
    pub fn validate(&self) -> Result<(), Error> {
        let mut problems = Vec::new();
        if self.years == 0 {
            problems.push("--years must be at least 1".to_owned());
        }
        if self.steps_per_year < MIN_STEPS {
            problems.push(format!("--steps-per-year {} is below the minimum {MIN_STEPS}", self.steps_per_year));
        }
        for (flag, side) in [("--height", self.height), ("--width", self.width)] {
            if side < MIN_SIDE {
                problems.push(format!("{flag} {side} is below the minimum {MIN_SIDE}"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(Error::DataSetting(problems.join("; "))) }
    }

    /// Bytes of field data the generator writes (all four splits' files, without metadata).
    pub fn field_bytes(&self) -> u64 {
        let files = self.years as u64 + 2;
        files * (self.steps_per_year * CHANNELS * self.height * self.width * 4) as u64
    }
}

/// The directories a dataset of `out` consists of, as the configs name them.
fn split_dirs(out: &Path) -> [PathBuf; 3] {
    ["train", "valid", "test"].map(|split| out.join(split))
}

/// Statistics files, relative to `out`.
pub const GLOBAL_MEANS: &str = "stats/global_means.npy";
pub const GLOBAL_STDS: &str = "stats/global_stds.npy";
pub const TIME_MEANS: &str = "stats/time_means.npy";

/// What the generator reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A year file is started; `steps` [`Progress::Step`]s follow.
    File {
        path: &'a Path,
        steps: usize,
    },
    Step,
}

/// Writes the whole dataset under `out`. An existing dataset there is an error unless
/// `replace`, in which case its year files and statistics are removed first (and nothing
/// else), so no stale year of an earlier, larger run is left behind.
pub fn generate(out: &Path, config: &SynthConfig, replace: bool, progress: &mut dyn FnMut(Progress<'_>)) -> Result<Vec<PathBuf>, Error> {
    config.validate()?;
    clear_previous(out, replace)?;
    let [train, valid, test] = split_dirs(out);
    let mut plan: Vec<(PathBuf, u64)> = (0..config.years as u64).map(|n| (train.clone(), FIRST_YEAR + n)).collect();
    plan.push((valid, FIRST_YEAR + config.years as u64));
    plan.push((test, FIRST_YEAR + config.years as u64 + 1));

    let planet = Planet::new(config.seed, config.height, config.width);
    let mut accumulator = Accumulator::new(config.height * config.width);
    let mut written = Vec::with_capacity(plan.len() + 3);
    for (dir, year) in plan {
        std::fs::create_dir_all(&dir).map_err(|err| Error::io(&dir, err))?;
        let path = dir.join(format!("{year}.h5"));
        let year = Year::new(config.seed, year, config.steps_per_year);
        let training = dir == train;
        write_year(&path, &planet, &year, config, training.then_some(&mut accumulator), progress)?;
        written.push(path);
    }
    written.extend(accumulator.write(out, config)?);
    Ok(written)
}

/// Refuses to mix with an existing dataset, or removes its files when replacing.
fn clear_previous(out: &Path, replace: bool) -> Result<(), Error> {
    let mut previous = Vec::new();
    for dir in split_dirs(out) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".h5") || name.ends_with(".h5.partial") {
                previous.push(entry.path());
            }
        }
    }
    previous.extend([GLOBAL_MEANS, GLOBAL_STDS, TIME_MEANS].map(|file| out.join(file)).into_iter().filter(|p| p.exists()));
    if previous.is_empty() {
        return Ok(());
    }
    if !replace {
        return Err(Error::Data {
            path: out.to_owned(),
            message: format!(
                "already holds a dataset ({} files, e.g. {}); pass --force to replace it",
                previous.len(),
                previous[0].display()
            ),
        });
    }
    previous.iter().try_for_each(|path| std::fs::remove_file(path).map_err(|err| Error::io(path, err)))
}

/// One computed time step and its per-channel sums, for the statistics.
struct Step {
    fields: Vec<f32>,
    sums: [(f64, f64); CHANNELS],
}

/// Computes the steps on worker threads (step t on worker t mod W, each with a small
/// queue, so they arrive in order) and writes them one chunk at a time through a
/// `.partial` file that is renamed when complete: an interrupted run leaves no file the
/// loader would pick up.
fn write_year(
    path: &Path,
    planet: &Planet,
    year: &Year,
    config: &SynthConfig,
    mut accumulator: Option<&mut Accumulator>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), Error> {
    let (steps, h, w) = (config.steps_per_year, config.height, config.width);
    let partial = path.with_extension("h5.partial");
    let failed = |err: hdf5::Error| Error::io(path, std::io::Error::other(err.to_string()));
    // Without modification times the same arguments give byte-identical files.
    let file = hdf5::File::with_options().with_fcpl(|p| p.obj_track_times(false)).create(&partial).map_err(failed)?;
    let fields = file
        .new_dataset::<f32>()
        .chunk((1, CHANNELS, h, w))
        .obj_track_times(false)
        .shape((steps, CHANNELS, h, w))
        .create(FIELDS)
        .map_err(failed)?;
    progress(Progress::File { path, steps });

    let workers = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 4).min(steps);
    std::thread::scope(|scope| -> Result<(), Error> {
        let queues: Vec<Receiver<Step>> = (0..workers)
            .map(|worker| {
                let (sender, queue) = sync_channel(2);
                scope.spawn(move || {
                    for t in (worker..steps).step_by(workers) {
                        if sender.send(compute_step(planet, year, t, h * w)).is_err() {
                            return;
                        }
                    }
                });
                queue
            })
            .collect();
        for t in 0..steps {
            let step = queues[t % workers]
                .recv()
                .map_err(|_| Error::io(path, std::io::Error::other(format!("generator thread died at step {t}"))))?;
            let view = ArrayView4::from_shape((1, CHANNELS, h, w), &step.fields)
                .map_err(|err| Error::io(path, std::io::Error::other(err.to_string())))?;
            fields.write_slice(view, s![t..t + 1, .., .., ..]).map_err(failed)?;
            if let Some(accumulator) = accumulator.as_deref_mut() {
                accumulator.add(&step);
            }
            progress(Progress::Step);
        }
        Ok(())
    })?;
    drop(fields);
    file.close().map_err(failed)?;
    std::fs::rename(&partial, path).map_err(|err| Error::io(path, err))
}

fn compute_step(planet: &Planet, year: &Year, t: usize, plane: usize) -> Step {
    let mut fields = vec![0.0f32; CHANNELS * plane];
    year.step(planet, t, &mut fields);
    let mut sums = [(0.0, 0.0); CHANNELS];
    for (sum, values) in sums.iter_mut().zip(fields.chunks_exact(plane)) {
        *sum = values.iter().fold((0.0, 0.0), |(s, sq), &v| (s + f64::from(v), sq + f64::from(v) * f64::from(v)));
    }
    Step { fields, sums }
}

/// Running sums over the training steps, added in step order so that the statistics do not
/// depend on the number of threads.
struct Accumulator {
    steps: usize,
    plane: usize,
    sums: [(f64, f64); CHANNELS],
    time_sum: Vec<f64>,
}

impl Accumulator {
    fn new(plane: usize) -> Accumulator {
        Accumulator { steps: 0, plane, sums: [(0.0, 0.0); CHANNELS], time_sum: vec![0.0; CHANNELS * plane] }
    }

    fn add(&mut self, step: &Step) {
        self.steps += 1;
        for (total, (s, sq)) in self.sums.iter_mut().zip(step.sums) {
            total.0 += s;
            total.1 += sq;
        }
        for (total, &value) in self.time_sum.iter_mut().zip(&step.fields) {
            *total += f64::from(value);
        }
    }

    /// Population statistics (NumPy's default `ddof=0`) over every training value.
    fn write(&self, out: &Path, config: &SynthConfig) -> Result<[PathBuf; 3], Error> {
        let count = (self.steps * self.plane) as f64;
        let means: Vec<f32> = self.sums.iter().map(|(s, _)| (s / count) as f32).collect();
        let stds: Vec<f32> = self.sums.iter().map(|(s, sq)| (sq / count - (s / count).powi(2)).max(0.0).sqrt() as f32).collect();
        let time_means: Vec<f32> = self.time_sum.iter().map(|total| (total / self.steps as f64) as f32).collect();
        let stats_dir = out.join("stats");
        std::fs::create_dir_all(&stats_dir).map_err(|err| Error::io(&stats_dir, err))?;
        let paths = [GLOBAL_MEANS, GLOBAL_STDS, TIME_MEANS].map(|file| out.join(file));
        npy::write_f32(&paths[0], &[1, CHANNELS, 1, 1], &means)?;
        npy::write_f32(&paths[1], &[1, CHANNELS, 1, 1], &stds)?;
        npy::write_f32(&paths[2], &[1, CHANNELS, config.height, config.width], &time_means)?;
        Ok(paths)
    }
}
