//! Every figure a chapter quotes from a recorded run is read off the recording, not typed.
//!
//! A chapter writes such a figure as a link naming the recording and the measure,
//! `[204 ms](recorded:h200-short-0workers#gpu-range=forward)`; this test finds every one,
//! computes the measure from the recording's trace and metrics, and holds the figure to it
//! within 5%. A figure changed in the text, or a recording replaced by one that reads
//! otherwise, fails here, naming the chapter's line. The measures are defined in
//! [`Recorded::measure`].

use std::collections::HashMap;
use std::path::Path;

use scalebook_shared::config::ConfigFile;
use scalebook_shared::profile::ranges;
use scalebook_shared::profile::trace::LaneKind;

use crate::support::links;
use crate::{RECORDINGS, dir, gpu_backwards, root, timeline};

/// How far a quoted figure may be from what the recording reads (relative).
const TOLERANCE: f64 = 0.05;

/// The link scheme of a figure read off a recording.
const SCHEME: &str = "recorded";

/// One figure a chapter quotes: where, the text shown, and what it claims to read.
struct Quote {
    place: String,
    text: String,
    recording: String,
    measure: String,
}

/// Every `[text](recorded:NAME#MEASURE)` link of every chapter.
fn quotes() -> Vec<Quote> {
    let chapters = root().join("static/chapters");
    let mut files: Vec<_> = std::fs::read_dir(&chapters).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "md"));
    files.sort();
    files.iter().flat_map(|path| quotes_in(path)).collect()
}

fn quotes_in(path: &Path) -> Vec<Quote> {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let quotes = links(&text, SCHEME).into_iter().map(|(at, shown, target)| {
        let (recording, measure) = target.split_once('#').unwrap_or((target, ""));
        let line = text[..at].lines().count().max(1);
        Quote { place: format!("{file}:{line}"), text: shown.to_owned(), recording: recording.to_owned(), measure: measure.to_owned() }
    });
    quotes.collect()
}

/// What a quote says: one figure, several in order, a range, or a bound.
#[derive(Debug)]
enum Said {
    One(f64),
    Several(Vec<f64>),
    Range(f64, f64),
    Under(f64),
}

/// Small counts as the text writes them.
const WORDS: [&str; 13] = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

/// What one unit is worth in the measures' own units (seconds, bytes, bytes per second,
/// fractions, counts and samples per second).
fn scale(unit: &str) -> f64 {
    match unit {
        "µs" => 1e-6,
        "ms" => 1e-3,
        "MB" => 1e6,
        "GB/s" => 1e9,
        "%" => 0.01,
        _ => 1.0,
    }
}

/// A number as written (`332`, `1.5`, `1,024`, `five`) and the unit after it, if any.
fn figure(part: &str) -> Option<(f64, String)> {
    let part = part.trim();
    let (number, unit) = part.split_once(' ').unwrap_or((part, ""));
    let (number, unit) = match number.strip_suffix('%') {
        Some(number) => (number, "%"),
        None => (number, unit),
    };
    let value = match WORDS.iter().position(|w| w.eq_ignore_ascii_case(number)) {
        Some(n) => n as f64,
        None => number.replace(',', "").parse().ok()?,
    };
    Some((value, unit.trim().to_owned()))
}

/// Reads a quote's text: `6 ms`, `about 0.21 s`, `13 to 18 ms`, `16.1 and 15.6`,
/// `under 1 ms`; the last part's unit holds for every part.
fn said(text: &str) -> Option<Said> {
    let text = ["about ", "nearly ", "almost ", "some "].iter().fold(text.trim(), |t, q| t.strip_prefix(q).unwrap_or(t));
    if let Some(bound) = text.strip_prefix("under ") {
        let (value, unit) = figure(bound)?;
        return Some(Said::Under(value * scale(&unit)));
    }
    let parts: Vec<&str> =
        if text.contains(" to ") { text.split(" to ").collect() } else { text.split([',']).flat_map(|p| p.split(" and ")).collect() };
    let figures: Vec<(f64, String)> = parts.iter().map(|p| figure(p)).collect::<Option<_>>()?;
    let unit = scale(&figures.last()?.1);
    let values: Vec<f64> = figures.iter().map(|(v, _)| v * unit).collect();
    Some(match values.as_slice() {
        [one] => Said::One(*one),
        [low, high] if text.contains(" to ") => Said::Range(*low, *high),
        _ => Said::Several(values),
    })
}

fn close(quoted: f64, read: f64) -> bool {
    (quoted - read).abs() <= TOLERANCE * read.abs().max(f64::MIN_POSITIVE)
}

/// Whether what a quote says holds for the values the recording reads.
fn holds(said: &Said, read: &[f64]) -> bool {
    let low = read.iter().copied().fold(f64::INFINITY, f64::min);
    let high = read.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match said {
        Said::One(x) => read.len() == 1 && close(*x, read[0]),
        Said::Several(xs) => xs.len() == read.len() && xs.iter().zip(read).all(|(x, r)| close(*x, *r)),
        Said::Range(a, b) => !read.is_empty() && close(*a, low) && close(*b, high),
        Said::Under(x) => !read.is_empty() && high < *x,
    }
}

/// A GPU event of a recording: its name, category, start and duration (seconds).
struct GpuSpan {
    name: String,
    category: String,
    start: f64,
    dur: f64,
}

/// A recording as the measures read it (times in seconds).
struct Recorded {
    name: String,
    /// The trainer's own ranges on the CPU: (name, start, end).
    ranges: Vec<(String, f64, f64)>,
    /// Everything on the GPU's streams.
    gpu: Vec<GpuSpan>,
    /// The GPU's backward passes: (start, end).
    backwards: Vec<(f64, f64)>,
    /// The metrics, by tag: (step, epoch, wall, value) in the order written.
    metrics: HashMap<String, Vec<(u64, u64, f64, f64)>>,
}

const SECONDS: f64 = 1e-6;

impl Recorded {
    fn load(name: &str) -> Recorded {
        let timeline = timeline(name);
        let mut ranges = Vec::new();
        let mut gpu = Vec::new();
        for lane in timeline.lanes() {
            let spans = lane.rows.iter().flat_map(|row| row.spans());
            if lane.kind == LaneKind::Ranges {
                ranges.extend(spans.map(|s| (timeline.name(s.name).to_owned(), s.start * SECONDS, s.end * SECONDS)));
            } else if lane.kind == LaneKind::Thread && lane.label.starts_with("GPU ") {
                gpu.extend(spans.map(|s| GpuSpan {
                    name: timeline.name(s.name).to_owned(),
                    category: timeline.category(s.name).to_owned(),
                    start: s.start * SECONDS,
                    dur: s.duration() * SECONDS,
                }));
            }
        }
        ranges.sort_by(|a, b| a.1.total_cmp(&b.1));
        let backwards = gpu_backwards(&timeline).into_iter().map(|(a, b)| (a * SECONDS, b * SECONDS)).collect();
        Recorded { name: name.to_owned(), ranges, gpu, backwards, metrics: metrics(name) }
    }

    /// What `measure` reads in this recording; `Err` names what is wrong with the measure.
    fn measure(&self, measure: &str, others: &mut Recordings) -> Result<Vec<f64>, String> {
        let (kind, arg) = measure.split_once('=').unwrap_or((measure, ""));
        let patterns: Vec<&str> = arg.split('|').collect();
        Ok(match kind {
            // The mean of the profiled steps, each the trainer's `step N` range.
            "step" => vec![mean(&self.steps())],
            // The mean of a range of the trainer's (on the CPU), and of its copy on the GPU.
            "range" => vec![mean(&self.range(arg))],
            "ranges" => self.range(arg),
            "gpu-range" => {
                vec![mean(&self.gpu.iter().filter(|s| s.name == arg && s.category.ends_with(GPU_RANGE)).map(|s| s.dur).collect::<Vec<_>>())]
            }
            // The host's idle time between the end of range A and the start of the next B.
            "gap" => vec![mean(&self.gaps(arg)?)],
            // A batch's host-to-device copy: its mean time, both copies' time per step, its rate,
            // and the copies' share of the steps.
            "copy" => vec![mean(&self.batch_copies())],
            "copies" => vec![self.batch_copies().iter().sum::<f64>() / self.steps().len() as f64],
            "copy-rate" => vec![batch_bytes(arg)? / mean(&self.batch_copies())],
            "copies-share" => vec![self.batch_copies().iter().sum::<f64>() / self.steps().iter().sum::<f64>()],
            "batch-bytes" => vec![batch_bytes(arg)?],
            // Kernels whose name holds one of the patterns: their time over the two steps,
            // their share of the steps' time (and that of all other kernels), how many kinds, how many per step, and the time
            // of each of them that starts during a backward pass on the GPU.
            "kernels" => vec![self.kernels(&patterns).map(|s| s.dur).sum()],
            "kernels-share" => vec![self.kernels(&patterns).map(|s| s.dur).sum::<f64>() / self.steps().iter().sum::<f64>()],
            "other-kernels-share" => vec![
                self.kernels(&[""]).filter(|s| !matches(&s.name, &patterns)).map(|s| s.dur).sum::<f64>() / self.steps().iter().sum::<f64>(),
            ],
            "kernel-kinds" => {
                let mut names: Vec<&str> = self.kernels(&patterns).map(|s| s.name.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                vec![names.len() as f64]
            }
            "per-step" => vec![self.gpu.iter().filter(|s| matches(&s.name, &patterns)).count() as f64 / self.steps().len() as f64],
            "in-backward" => {
                self.kernels(&patterns).filter(|s| self.backwards.iter().any(|(a, b)| (*a..*b).contains(&s.start))).map(|s| s.dur).collect()
            }
            // The run's metrics: samples per second by epoch, the gain over another recording's,
            // the median step-to-step rate, and the wait for each epoch's first batch.
            "epoch-rates" => self.tag(EPOCH_RATE),
            "epoch-rate" => vec![*self.tag(EPOCH_RATE).get(index(arg)?).ok_or(format!("no epoch {arg}"))?],
            "gain" => vec![mean(&self.tag(EPOCH_RATE)) / mean(&others.get(arg).tag(EPOCH_RATE)) - 1.0],
            "median-rate" => vec![self.batch() / median(self.step_walls())],
            "epoch-first-waits" => self.epoch_first_waits(),
            _ => return Err(format!("no measure {kind:?}")),
        })
    }

    fn range(&self, name: &str) -> Vec<f64> {
        self.ranges.iter().filter(|(n, ..)| n == name).map(|(_, a, b)| b - a).collect()
    }

    fn steps(&self) -> Vec<f64> {
        self.ranges.iter().filter(|(n, ..)| n.starts_with(ranges::STEP_PREFIX)).map(|(_, a, b)| b - a).collect()
    }

    fn gaps(&self, arg: &str) -> Result<Vec<f64>, String> {
        let (from, to) = arg.split_once(',').ok_or("gap=A,B")?;
        let ends = self.ranges.iter().filter(|(n, ..)| n == from).map(|r| r.2);
        Ok(ends.filter_map(|end| self.ranges.iter().find(|(n, a, _)| n == to && *a >= end).map(|(_, a, _)| a - end)).collect())
    }

    /// The batch's copies to the GPU: host-to-device copies at least half as long as the
    /// longest (the small ones are scalars, such as the loss scale).
    fn batch_copies(&self) -> Vec<f64> {
        let copies: Vec<f64> = self.gpu.iter().filter(|s| s.name.starts_with("Memcpy HtoD")).map(|s| s.dur).collect();
        let longest = copies.iter().copied().fold(0.0, f64::max);
        copies.into_iter().filter(|d| *d >= longest / 2.0).collect()
    }

    fn kernels<'a>(&'a self, patterns: &'a [&str]) -> impl Iterator<Item = &'a GpuSpan> + 'a {
        self.gpu.iter().filter(|s| s.category == "kernel" && matches(&s.name, patterns))
    }

    fn tag(&self, tag: &str) -> Vec<f64> {
        self.metrics.get(tag).map(|rows| rows.iter().map(|r| r.3).collect()).unwrap_or_default()
    }

    /// The samples of a step: an epoch's samples per second over its iterations per second.
    fn batch(&self) -> f64 {
        (self.tag(EPOCH_RATE)[0] / self.tag("Avg iters per sec")[0]).round()
    }

    /// The wall-clock time between one step's loss and the next's.
    fn step_walls(&self) -> Vec<f64> {
        let walls: Vec<f64> = self.metrics[STEP_LOSS].iter().map(|r| r.2).collect();
        walls.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn epoch_first_waits(&self) -> Vec<f64> {
        let rows = &self.metrics[DATA_WAIT];
        rows.iter().enumerate().filter(|(i, r)| *i == 0 || rows[i - 1].1 != r.1).map(|(_, r)| r.3).collect()
    }
}

/// The category Kineto gives the trainer's ranges where it copies them onto a GPU stream.
const GPU_RANGE: &str = "gpu_user_annotation";
const EPOCH_RATE: &str = "Avg samples per sec";
const STEP_LOSS: &str = "Step/Loss/train";
const DATA_WAIT: &str = "Step time/data wait";

fn matches(name: &str, patterns: &[&str]) -> bool {
    patterns.iter().any(|p| name.contains(p))
}

fn index(arg: &str) -> Result<usize, String> {
    arg.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).ok_or(format!("{arg:?} is not a number from 1"))
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The bytes of one batch's input (or target) of a shipped config on one rank: batch ×
/// channels × height × width in float32.
fn batch_bytes(config: &str) -> Result<f64, String> {
    let text = std::fs::read_to_string(root().join("config/ViT.yaml")).unwrap();
    let config = ConfigFile::parse(&text).unwrap().get(config).map_err(|e| e.to_string())?;
    let [h, w] = config.img_size;
    Ok((config.global_batch_size * config.n_in_channels * h * w * 4) as f64)
}

fn metrics(name: &str) -> HashMap<String, Vec<(u64, u64, f64, f64)>> {
    let text = std::fs::read_to_string(dir(name).join("metrics.jsonl")).unwrap();
    let mut metrics: HashMap<String, Vec<_>> = HashMap::new();
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let number = |key: &str| row[key].as_f64().unwrap();
        let tag = row["tag"].as_str().unwrap().to_owned();
        metrics.entry(tag).or_default().push((number("step") as u64, number("epoch") as u64, number("wall"), number("value")));
    }
    metrics
}

/// The recordings read so far, each loaded once.
#[derive(Default)]
struct Recordings(HashMap<String, std::rc::Rc<Recorded>>);

impl Recordings {
    fn get(&mut self, name: &str) -> std::rc::Rc<Recorded> {
        self.0.entry(name.to_owned()).or_insert_with(|| std::rc::Rc::new(Recorded::load(name))).clone()
    }
}

#[test]
fn every_figure_quoted_from_a_recording_is_what_the_recording_reads() {
    let quotes = quotes();
    let mut recordings = Recordings::default();
    let mut wrong = Vec::new();
    for quote in &quotes {
        assert!(dir(&quote.recording).is_dir(), "{}: no recording {:?}", quote.place, quote.recording);
        let recorded = recordings.get(&quote.recording);
        let read = recorded.measure(&quote.measure, &mut recordings).unwrap_or_else(|e| panic!("{}: {e}", quote.place));
        let said = said(&quote.text).unwrap_or_else(|| panic!("{}: no figure in {:?}", quote.place, quote.text));
        if !holds(&said, &read) {
            wrong.push(format!("{}: {:?} ({}#{}) reads {read:?}", quote.place, quote.text, recorded.name, quote.measure));
        }
    }
    assert!(wrong.is_empty(), "figures that are not what their recording reads (within 5%):\n{}", wrong.join("\n"));
    for name in RECORDINGS {
        assert!(quotes.iter().any(|q| q.recording == name), "no chapter quotes a figure of {name}");
    }
}

#[test]
fn a_quote_is_read_as_written() {
    assert!(matches!(said("332 MB"), Some(Said::One(x)) if close(x, 332e6)));
    assert!(matches!(said("about 0.21 s"), Some(Said::One(x)) if x == 0.21));
    assert!(matches!(said("1.5%"), Some(Said::One(x)) if (x - 0.015).abs() < 1e-12));
    assert!(matches!(said("five"), Some(Said::One(x)) if x == 5.0));
    assert!(matches!(said("13 to 18 ms"), Some(Said::Range(a, b)) if close(a, 0.013) && close(b, 0.018)));
    assert!(matches!(said("16.1 and 15.6"), Some(Said::Several(v)) if v == [16.1, 15.6]));
    assert!(matches!(said("under 1 ms"), Some(Said::Under(x)) if close(x, 1e-3)));
    assert!(said("a tenth").is_none());
    assert!(holds(&Said::One(204e-3), &[0.2034]) && !holds(&Said::One(250e-3), &[0.2034]));
    assert!(holds(&Said::Range(0.013, 0.018), &[0.0130, 0.0176, 0.0174]) && !holds(&Said::Range(0.010, 0.018), &[0.013, 0.0176]));
}
