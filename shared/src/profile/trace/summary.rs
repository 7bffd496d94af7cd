//! A run's profile told in numbers, so that nobody downloads hundreds of MB of trace to learn
//! where a step's time went: per rank and step, the time in each of the trainer's ranges; the
//! ops that took longest; how much of the communication overlapped computation; and, per
//! collective call, which rank arrived last (the straggler every other rank waited for).
//!
//! Each rank's file is read once, as a stream ([`RankSummary::read`]): its ranges are kept (a
//! few per step), its ops summed by name as they pass, and of its computation only when and
//! where it ran (24 bytes an op) until the communication it may overlap is known. Nothing else
//! of the file is kept.

use std::collections::HashMap;
use std::io;

use serde::{Deserialize, Serialize};

use super::bubble::{Bubble, Passes, bubbles};
use super::compact::CompactWriter;
use super::read::{Event, stream_events};
use super::{RANGE_CATEGORY, Trace, marks_a_range};
use crate::Error;
use crate::profile::ranges;

/// Ops listed per rank, the longest first.
pub const TOP_OPS: usize = 10;
/// Collective calls listed in the straggler table, at most (the first ones, in call order).
pub const MAX_STRAGGLERS: usize = 1_000;

/// What the server answers for a run's profile summary (`api/runs/ID/profile/summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    pub ranks: Vec<RankSummary>,
    /// One row per collective call made by more than one rank, in call order.
    pub stragglers: Vec<Straggler>,
    /// Ranks whose trace could not be read, with the reason.
    pub unread: Vec<String>,
    /// A pipelined run's bubble in each profiled step, measured from its passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bubbles: Vec<Bubble>,
}

/// One rank's profile in numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    pub rank: usize,
    /// Timed events in its trace.
    pub events: u64,
    /// Its first event's start and its last one's end, in its file's own clock (µs, as the
    /// file's timestamps): what an excerpt of it is asked against.
    pub first_us: f64,
    pub last_us: f64,
    pub steps: Vec<StepSplit>,
    /// The ops (CPU ops and GPU kernels) that took longest, summed by name; an op's time
    /// includes what it called, as PyTorch's `key_averages()` totals do.
    pub top_ops: Vec<OpTotal>,
    /// Time inside the trainer's communication ranges (µs, each instant counted once).
    pub communication_us: f64,
    /// The part of it during which the rank computed too: a GPU kernel that is not a
    /// collective's, or an op on another thread than the collective's.
    pub overlapped_us: f64,
    /// A pipelined run's passes in each profiled step (none without a pipeline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passes: Vec<Passes>,
    /// Where each of its collective calls began (µs on the shared clock), for the straggler
    /// table; not sent.
    #[serde(skip)]
    calls: Vec<Call>,
}

/// One profiled step of one rank: its length and the time in each range inside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSplit {
    /// The step's number (`step N` in the trace).
    pub step: u64,
    pub total_us: f64,
    /// By range name, in the order a step runs them (the trainer's ranges, then each
    /// collective); a collective's time is also inside the range that called it.
    pub ranges: Vec<RangeTime>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeTime {
    pub name: String,
    pub us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpTotal {
    pub name: String,
    pub count: u64,
    pub total_us: f64,
}

/// One collective call across the ranks: the rank that started it last, and how long the
/// first to arrive had waited for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Straggler {
    /// The range's name (`c10d::all_reduce`).
    pub collective: String,
    /// Which call of that collective (0 is the first profiled).
    pub call: usize,
    /// The step the last rank made it in.
    pub step: Option<u64>,
    pub last_rank: usize,
    /// The last rank's arrival after the first rank's (µs).
    pub wait_us: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct Call {
    name: String,
    start: f64,
    step: Option<u64>,
}

/// A range of the trainer's, as the pass keeps it; its thread as the reader numbers them.
struct Mark {
    name: String,
    thread: usize,
    start: f64,
    end: f64,
}

/// An op that computed: when, and on which thread (or on the device).
struct Work {
    start: f64,
    end: f64,
    thread: usize,
    on_device: bool,
}

impl ProfileSummary {
    /// The summary of every rank's own summary, with the straggler table across them.
    pub fn new(mut ranks: Vec<RankSummary>, unread: Vec<String>) -> ProfileSummary {
        ranks.sort_by_key(|r| r.rank);
        let stragglers = stragglers(&ranks);
        let bubbles = bubbles(&ranks.iter().map(|r| r.passes.as_slice()).collect::<Vec<_>>());
        ProfileSummary { ranks, stragglers, unread, bubbles }
    }
}

impl RankSummary {
    /// Reads rank `rank`'s trace from `reader`, in one pass.
    pub fn read(rank: usize, reader: impl io::Read) -> Result<RankSummary, Error> {
        Ok(RankSummary::read_each(rank, reader, |_| {})?.0)
    }

    /// [`RankSummary::read`], the events also written to `compact` (see [`Compact`]), which is
    /// finished with `source` and handed back (or what failed in writing it).
    ///
    /// [`Compact`]: super::Compact
    pub fn read_writing<W: io::Write>(
        rank: usize,
        reader: impl io::Read,
        compact: W,
        source: &str,
    ) -> Result<(RankSummary, io::Result<W>), Error> {
        let mut writer = CompactWriter::new(compact);
        let (summary, trace) = RankSummary::read_each(rank, reader, |event| writer.push(event))?;
        Ok((summary, writer.finish(&trace, source)))
    }

    /// The summary, and the trace without its events, each event also shown to `each`.
    fn read_each(rank: usize, reader: impl io::Read, mut each: impl FnMut(&Event)) -> Result<(RankSummary, Trace), Error> {
        let mut pass = Pass::default();
        let trace = stream_events(reader, |event| {
            each(&event);
            pass.add(event);
        })
        .map_err(|e| Error::Parse { what: format!("the trace of rank {rank}"), message: e.to_string() })?;
        Ok((pass.finish(rank, trace.base_ns.map_or(0.0, |ns| ns / 1e3)), trace))
    }
}

/// Whether a range is communication: a collective's, or the gradient all-reduce around them.
fn communicates(name: &str) -> bool {
    name.starts_with(ranges::COLLECTIVE_PREFIX) || name == ranges::GRAD_ALLREDUCE
}

/// Whether an op is a collective's own work (a NCCL kernel, a Gloo call) rather than
/// computation.
fn collective_op(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["nccl", "gloo", "c10d", "all_reduce", "allreduce", "all_gather", "allgather", "broadcast", "reduce_scatter"]
        .iter()
        .any(|word| name.contains(word))
}

/// What one pass over a rank's trace keeps.
#[derive(Default)]
struct Pass {
    events: u64,
    /// The first start and the last end seen.
    span: Option<(f64, f64)>,
    marks: Vec<Mark>,
    /// By op name: calls, total time, and whether it is a collective's own work (decided
    /// once per name).
    ops: HashMap<String, (u64, f64, bool)>,
    work: Vec<Work>,
}

/// Communication ranges merged where they overlap, with the threads that made them.
struct Talk {
    from: f64,
    to: f64,
    threads: Vec<usize>,
}

impl Pass {
    fn add(&mut self, event: Event) {
        self.events += 1;
        let (start, end) = (event.start, event.start + event.dur);
        self.span = Some(self.span.map_or((start, end), |(first, last)| (first.min(start), last.max(end))));
        if event.category == RANGE_CATEGORY {
            self.marks.push(Mark { name: event.name, thread: event.thread, start, end });
            return;
        }
        if marks_a_range(&event.category) {
            return;
        }
        let collective = match self.ops.get_mut(&event.name) {
            Some(sum) => {
                *sum = (sum.0 + 1, sum.1 + event.dur, sum.2);
                sum.2
            }
            None => {
                let collective = collective_op(&event.name);
                self.ops.insert(event.name, (1, event.dur, collective));
                collective
            }
        };
        if !collective {
            self.work.push(Work { start, end, thread: event.thread, on_device: event.category == "kernel" });
        }
    }

    /// The communication ranges, merged.
    fn communication(&self) -> Vec<Talk> {
        let mut merged: Vec<Talk> = Vec::new();
        for mark in self.marks.iter().filter(|m| communicates(&m.name)) {
            match merged.last_mut() {
                Some(last) if mark.start <= last.to => {
                    last.to = last.to.max(mark.end);
                    if !last.threads.contains(&mark.thread) {
                        last.threads.push(mark.thread);
                    }
                }
                _ => merged.push(Talk { from: mark.start, to: mark.end, threads: vec![mark.thread] }),
            }
        }
        merged
    }

    /// The time inside communication during which the rank computed as well: a kernel on the
    /// device, or an op on a thread other than the communicating one.
    fn overlapped(&self, communication: &[Talk]) -> f64 {
        let mut busy = Vec::new();
        for work in &self.work {
            let first = communication.partition_point(|talk| talk.to <= work.start);
            for talk in communication[first..].iter().take_while(|talk| talk.from < work.end) {
                if work.on_device || !talk.threads.contains(&work.thread) {
                    busy.push((work.start.max(talk.from), work.end.min(talk.to)));
                }
            }
        }
        measure(&union(busy))
    }

    fn finish(mut self, rank: usize, shift: f64) -> RankSummary {
        self.marks.sort_by(|a, b| a.start.total_cmp(&b.start));
        let communication = self.communication();
        let overlapped_us = self.overlapped(&communication);
        let mut top_ops: Vec<OpTotal> =
            self.ops.into_iter().map(|(name, (count, total_us, _))| OpTotal { name, count, total_us }).collect();
        top_ops.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.name.cmp(&b.name)));
        top_ops.truncate(TOP_OPS);
        let steps = steps(&self.marks);
        let step_of = |t: f64| steps.iter().find(|(_, start, end)| (*start..*end).contains(&t)).map(|(n, ..)| *n);
        let calls = self
            .marks
            .iter()
            .filter(|m| m.name.starts_with(ranges::COLLECTIVE_PREFIX))
            .map(|m| Call { name: m.name.clone(), start: m.start + shift, step: step_of(m.start) })
            .collect();
        let (first_us, last_us) = self.span.unwrap_or_default();
        RankSummary {
            rank,
            events: self.events,
            first_us,
            last_us,
            steps: steps.iter().map(|&(step, start, end)| split(&self.marks, step, start, end)).collect(),
            top_ops,
            communication_us: communication.iter().map(|talk| talk.to - talk.from).sum(),
            overlapped_us,
            passes: steps.iter().filter_map(|&(step, start, end)| passes(&self.marks, step, start, end, shift)).collect(),
            calls,
        }
    }
}

/// The profiled steps (`step N` ranges): number, start and end, in order.
fn steps(marks: &[Mark]) -> Vec<(u64, f64, f64)> {
    let number = |m: &Mark| m.name.strip_prefix(ranges::STEP_PREFIX).and_then(|n| n.trim().parse::<u64>().ok());
    marks.iter().filter_map(|m| Some((number(m)?, m.start, m.end))).collect()
}

/// The pipeline passes that start inside step `step`, on the shared clock (`shift` added), if
/// it has any.
fn passes(marks: &[Mark], step: u64, start: f64, end: f64, shift: f64) -> Option<Passes> {
    let (mut inside, mut micro_batches, mut chunks) = (Vec::new(), 0, Vec::new());
    for mark in marks.iter().filter(|m| (start..end).contains(&m.start)) {
        let Some((_, micro_batch, chunk)) = ranges::read_pipeline_pass(&mark.name) else { continue };
        inside.push((mark.start, mark.end.min(end)));
        micro_batches = micro_batches.max(micro_batch + 1);
        if !chunks.contains(&chunk) {
            chunks.push(chunk);
        }
    }
    chunks.sort_unstable();
    let first = inside.iter().map(|i| i.0).reduce(f64::min)?;
    let last = inside.iter().map(|i| i.1).fold(first, f64::max);
    Some(Passes { step, first_us: first + shift, last_us: last + shift, busy_us: measure(&union(inside)), micro_batches, chunks })
}

/// The time in each range that starts inside step `step`, within the step: each instant of a
/// range counted once, however many threads marked it (a rank's intra-op threads may each
/// carry the range they work for), so no range is longer than its step.
fn split(marks: &[Mark], step: u64, start: f64, end: f64) -> StepSplit {
    let mut intervals: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    // A pipeline's passes are inside its forward and backward ranges, and measured apart.
    let inside = marks.iter().filter(|m| {
        (start..end).contains(&m.start) && !m.name.starts_with(ranges::STEP_PREFIX) && ranges::read_pipeline_pass(&m.name).is_none()
    });
    for mark in inside {
        let interval = (mark.start, mark.end.min(end));
        match intervals.iter_mut().find(|(name, _)| *name == mark.name) {
            Some((_, list)) => list.push(interval),
            None => intervals.push((&mark.name, vec![interval])),
        }
    }
    let mut ranges_in: Vec<RangeTime> =
        intervals.into_iter().map(|(name, list)| RangeTime { name: name.to_owned(), us: measure(&union(list)) }).collect();
    let order = |name: &str| ranges::STEP.iter().position(|s| *s == name).unwrap_or(ranges::STEP.len());
    ranges_in.sort_by_key(|r| order(&r.name));
    StepSplit { step, total_us: end - start, ranges: ranges_in }
}

/// The intervals merged where they overlap, in order.
fn union(mut intervals: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

fn measure(intervals: &[(f64, f64)]) -> f64 {
    intervals.iter().map(|(start, end)| end - start).sum()
}

/// One collective call as every rank made it: the n-th call of a name on each.
struct Across<'r> {
    name: &'r str,
    call: usize,
    arrivals: Vec<(usize, &'r Call)>,
}

impl Across<'_> {
    fn first(&self) -> f64 {
        self.arrivals.iter().map(|(_, c)| c.start).fold(f64::INFINITY, f64::min)
    }
}

/// Per collective call made by more than one rank, the rank that started it last and how
/// long after the first.
fn stragglers(ranks: &[RankSummary]) -> Vec<Straggler> {
    let mut calls: Vec<Across<'_>> = Vec::new();
    let mut index: HashMap<(&str, usize), usize> = HashMap::new();
    for rank in ranks {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for call in &rank.calls {
            let n = seen.entry(call.name.as_str()).or_default();
            let slot = *index.entry((call.name.as_str(), *n)).or_insert_with(|| {
                calls.push(Across { name: call.name.as_str(), call: *n, arrivals: Vec::new() });
                calls.len() - 1
            });
            calls[slot].arrivals.push((rank.rank, call));
            *n += 1;
        }
    }
    calls.sort_by(|a, b| a.first().total_cmp(&b.first()));
    calls
        .into_iter()
        .filter(|across| across.arrivals.len() > 1)
        .take(MAX_STRAGGLERS)
        .map(|across| {
            let (last_rank, last) =
                across.arrivals.iter().copied().max_by(|a, b| a.1.start.total_cmp(&b.1.start)).unwrap_or(across.arrivals[0]);
            let wait_us = last.start - across.first();
            Straggler { collective: across.name.to_owned(), call: across.call, step: last.step, last_rank, wait_us }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank's trace: two steps, each with the trainer's ranges and one all-reduce, ops on the
    /// main thread and, on rank 1, a kernel overlapping the all-reduce.
    fn trace(rank: usize, late: f64) -> String {
        let mut events = vec![
            r#"{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}}"#.to_owned(),
            r#"{"ph":"X","cat":"Trace","name":"PyTorch Profiler (0)","pid":"Spans","tid":1,"ts":0,"dur":1000}"#.to_owned(),
        ];
        let mut range = |name: &str, ts: f64, dur: f64| {
            events.push(format!(r#"{{"ph":"X","cat":"user_annotation","name":"{name}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}"#));
        };
        for (step, t0) in [(5u64, 0.0), (6, 100.0)] {
            range(&format!("step {step}"), t0, 100.0);
            range("data_wait", t0, 10.0);
            range("forward", t0 + 10.0, 30.0);
            range("backward", t0 + 40.0, 40.0);
            range("grad_allreduce", t0 + 80.0 + late, 10.0);
            range("c10d::all_reduce", t0 + 81.0 + late, 8.0);
            range("optimizer", t0 + 90.0 + late, 5.0);
        }
        for t in [12.0, 112.0] {
            events.push(format!(r#"{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{t},"dur":20}}"#));
        }
        events.push(r#"{"ph":"X","cat":"cpu_op","name":"gloo:all_reduce","pid":1,"tid":1,"ts":82,"dur":6}"#.to_owned());
        if rank == 1 {
            events.push(r#"{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":85,"dur":20}"#.to_owned());
        }
        format!(r#"{{"schemaVersion":1,"traceEvents":[{}],"baseTimeNanoseconds":1000000}}"#, events.join(","))
    }

    fn read(rank: usize, text: &str) -> RankSummary {
        RankSummary::read(rank, text.as_bytes()).unwrap()
    }

    #[test]
    fn a_rank_s_steps_ops_and_overlap() {
        let rank = read(1, &trace(1, 0.0));
        assert_eq!(rank.events, 18, "the profiler's own span is not an event");
        let steps: Vec<u64> = rank.steps.iter().map(|s| s.step).collect();
        assert_eq!(steps, [5, 6]);
        let split = &rank.steps[0];
        assert_eq!(split.total_us, 100.0);
        let names: Vec<(&str, f64)> = split.ranges.iter().map(|r| (r.name.as_str(), r.us)).collect();
        assert_eq!(
            names,
            [
                ("data_wait", 10.0),
                ("forward", 30.0),
                ("backward", 40.0),
                ("optimizer", 5.0),
                ("grad_allreduce", 10.0),
                ("c10d::all_reduce", 8.0)
            ]
        );
        assert_eq!(rank.top_ops[0], OpTotal { name: "aten::mm".into(), count: 2, total_us: 40.0 });
        // Communication: 80..90 and 180..190; the kernel 85..105 overlaps 5 µs of the first.
        assert_eq!((rank.communication_us, rank.overlapped_us), (20.0, 5.0));
        // Rank 0's collective runs on the thread that computes: nothing overlaps it.
        assert_eq!(read(0, &trace(0, 0.0)).overlapped_us, 0.0);
    }

    #[test]
    fn a_range_marked_on_several_threads_counts_once_and_within_its_step() {
        // Step 5 of `trace` (0..100 µs), its backward (40..80) also marked on two more
        // threads, and a data wait on another that runs past the step's end.
        let mut text = trace(0, 0.0);
        let extra = [("backward", 2, 45.0, 30.0), ("backward", 3, 42.0, 36.0), ("data_wait", 2, 95.0, 35.0)].map(|(name, tid, ts, dur)| {
            format!(r#"{{"ph":"X","cat":"user_annotation","name":"{name}","pid":1,"tid":{tid},"ts":{ts},"dur":{dur}}}"#)
        });
        text = text.replacen("\"traceEvents\":[", &format!("\"traceEvents\":[{},", extra.join(",")), 1);
        let step = read(0, &text).steps.into_iter().find(|s| s.step == 5).unwrap();
        let time = |name: &str| step.ranges.iter().find(|r| r.name == name).unwrap().us;
        assert_eq!(time("backward"), 40.0, "40..80 on three threads: 40 µs once, not 40 + 30 + 36");
        assert_eq!(time("data_wait"), 15.0, "0..10, and 95..130 up to the step's end");
        let trainer: f64 = step.ranges.iter().filter(|r| !r.name.starts_with("c10d::")).map(|r| r.us).sum();
        assert!(trainer <= step.total_us, "{trainer} µs of ranges in a {} µs step", step.total_us);
    }

    #[test]
    fn the_last_rank_at_each_collective_is_the_straggler() {
        let summary = ProfileSummary::new(vec![read(1, &trace(1, 3.0)), read(0, &trace(0, 0.0))], vec![]);
        assert_eq!(summary.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1]);
        let rows: Vec<(&str, usize, Option<u64>, usize, f64)> =
            summary.stragglers.iter().map(|s| (s.collective.as_str(), s.call, s.step, s.last_rank, s.wait_us)).collect();
        assert_eq!(rows, [("c10d::all_reduce", 0, Some(5), 1, 3.0), ("c10d::all_reduce", 1, Some(6), 1, 3.0)]);
        // What travels is the summary, not each call's arrival.
        let json = serde_json::to_string(&summary).unwrap();
        assert!(!json.contains("calls"), "{json}");
        let back: ProfileSummary = serde_json::from_str(&json).unwrap();
        assert_eq!(back.stragglers, summary.stragglers);
    }

    #[test]
    fn a_pipeline_s_passes_are_measured_apart_and_make_its_bubble() {
        // Two stages, one micro-batch each way: stage 0 runs forward 10..20 and backward
        // 50..70; stage 1 (its clock 5 µs behind, its base time 5 µs later) forward 20..30
        // and backward 30..50. The pipeline runs 10..70 on the shared clock.
        let stage = |base_ns: u64, passes: [(&str, f64, f64); 2]| {
            let mut events = vec![r#"{"ph":"X","cat":"user_annotation","name":"step 5","pid":1,"tid":1,"ts":0,"dur":100}"#.to_owned()];
            for (name, ts, dur) in passes {
                events.push(format!(r#"{{"ph":"X","cat":"user_annotation","name":"{name}","pid":1,"tid":1,"ts":{ts},"dur":{dur}}}"#));
            }
            format!(r#"{{"traceEvents":[{}],"baseTimeNanoseconds":{base_ns}}}"#, events.join(","))
        };
        let first = read(0, &stage(0, [("forward mb 0 chunk 0", 10.0, 10.0), ("backward mb 0 chunk 0", 50.0, 20.0)]));
        let second = read(1, &stage(5_000, [("forward mb 0 chunk 1", 15.0, 10.0), ("backward mb 0 chunk 1", 25.0, 20.0)]));
        assert!(first.steps[0].ranges.is_empty(), "passes are not step ranges: {:?}", first.steps[0].ranges);
        assert_eq!((first.passes[0].first_us, first.passes[0].last_us, first.passes[0].busy_us), (10.0, 70.0, 30.0));
        let summary = ProfileSummary::new(vec![first, second], vec![]);
        let bubble = &summary.bubbles[0];
        // 60 µs on 2 ranks, 30 µs busy on each: half idle; (p−1)/(m+p−1) = 1/2.
        assert_eq!((bubble.pipeline_us, bubble.fraction, bubble.stages, bubble.micro_batches), (60.0, 0.5, 2, 1));
        assert_eq!(bubble.formula, 0.5);
    }

    #[test]
    fn a_file_that_is_no_trace_is_an_error_naming_it() {
        let broken = RankSummary::read(2, &b"{\"traceEvents\": ["[..]).unwrap_err();
        assert!(broken.to_string().contains("rank 2"), "{broken}");
    }
}
