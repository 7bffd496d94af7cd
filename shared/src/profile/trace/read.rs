//! One rank's trace file as read: its timed events, one per complete (`X`) event or matched
//! `B`/`E` pair, and the names its metadata events give processes and threads.

use std::collections::{HashMap, HashSet};

use super::lenient::{RawEvent, Scalar};
use super::scan;
use crate::Error;

/// A thread of the trace: its process and thread ids as the file writes them (numbers or
/// text), and the names and sort indexes its metadata gives.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Thread {
    pub pid: String,
    pub tid: String,
    pub process_name: Option<String>,
    pub process_sort: Option<f64>,
    pub thread_name: Option<String>,
    pub thread_sort: Option<f64>,
}

/// A timed event: which thread ran it, its name and category, start and duration (µs).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Event {
    pub thread: usize,
    pub name: String,
    pub category: String,
    pub start: f64,
    pub dur: f64,
}

/// One parsed trace file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub(super) threads: Vec<Thread>,
    pub(super) events: Vec<Event>,
    /// Kineto's `baseTimeNanoseconds`: its timestamps count from there, so traces of
    /// different ranks line up once each is shifted by its own base.
    pub(super) base_ns: Option<f64>,
}

/// Thread ids compared as written, at most (see `Builder::raw_ids`).
const RAW_IDS: usize = 64;

/// The profiler's own span around the whole recording (Kineto's `Trace` category): not
/// something the program did, so it is not drawn.
const PROFILER_CATEGORY: &str = "Trace";

impl Trace {
    /// Reads a Chrome trace (the object form with `traceEvents`, or a bare list of events; a
    /// list whose closing bracket is missing, which the format allows, is read too). Events
    /// the timeline does not draw are skipped; only text that is not such JSON at all is an
    /// error.
    pub fn parse(text: &str) -> Result<Trace, Error> {
        let keep = |builder: &mut Builder, timed: Event| builder.events.push(timed);
        let (builder, base_ns) =
            Builder::stream(text.as_bytes(), keep).map_err(|e| Error::Parse { what: "the trace".into(), message: e.to_string() })?;
        Ok(Trace { threads: builder.threads, events: builder.events, base_ns })
    }

    /// How many timed events it holds.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// Reads a trace from `reader` as a stream, handing each timed event to `sink` (its thread as
/// the reader numbers them, name, category, start and duration in µs, `B`/`E` pairs matched)
/// and keeping none of them: memory stays that of one event, whatever the file's size. Returns
/// the trace without its events: its threads and Kineto's base time (ns), if the file gives
/// one.
pub(super) fn stream_events(reader: impl std::io::Read, mut sink: impl FnMut(Event)) -> Result<Trace, serde_json::Error> {
    Builder::stream(reader, |_, timed| sink(timed)).map(|(builder, base_ns)| Trace {
        threads: builder.threads,
        events: Vec::new(),
        base_ns,
    })
}

/// A trace as [`Trace::to_json`] writes it.
#[derive(serde::Serialize)]
struct Written<'a> {
    #[serde(rename = "traceEvents")]
    events: Vec<WrittenEvent<'a>>,
    #[serde(rename = "baseTimeNanoseconds", skip_serializing_if = "Option::is_none")]
    base_ns: Option<f64>,
}

/// One metadata or complete event as written.
#[derive(serde::Serialize)]
struct WrittenEvent<'a> {
    ph: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'a str,
    pid: &'a str,
    tid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<WrittenArgs<'a>>,
}

#[derive(serde::Serialize)]
struct WrittenArgs<'a> {
    name: Option<&'a str>,
    sort_index: Option<f64>,
}

impl<'a> WrittenEvent<'a> {
    fn metadata(name: &'static str, thread: &'a Thread, text: Option<&'a str>, sort_index: Option<f64>) -> WrittenEvent<'a> {
        let args = Some(WrittenArgs { name: text, sort_index });
        WrittenEvent { ph: "M", name, cat: "", pid: &thread.pid, tid: &thread.tid, ts: None, dur: None, args }
    }
}

impl Trace {
    /// The trace as Chrome-trace JSON (the object form) that [`Trace::parse`] reads back as
    /// it is: each thread named by metadata events (in order, so a reader numbers them the
    /// same), then every event as a complete (`X`) one, and Kineto's base time. Perfetto and
    /// `chrome://tracing` open it too.
    pub fn to_json(&self) -> String {
        let mut events = Vec::with_capacity(self.threads.len() * 2 + self.events.len());
        let mut processes = HashSet::new();
        for thread in &self.threads {
            events.push(WrittenEvent::metadata("thread_name", thread, thread.thread_name.as_deref(), None));
            if thread.thread_sort.is_some() {
                events.push(WrittenEvent::metadata("thread_sort_index", thread, None, thread.thread_sort));
            }
            if processes.insert(thread.pid.as_str()) {
                if thread.process_name.is_some() {
                    events.push(WrittenEvent::metadata("process_name", thread, thread.process_name.as_deref(), None));
                }
                if thread.process_sort.is_some() {
                    events.push(WrittenEvent::metadata("process_sort_index", thread, None, thread.process_sort));
                }
            }
        }
        events.extend(self.events.iter().map(|event| {
            let thread = &self.threads[event.thread];
            let (ts, dur) = (Some(event.start), Some(event.dur));
            WrittenEvent { ph: "X", name: &event.name, cat: &event.category, pid: &thread.pid, tid: &thread.tid, ts, dur, args: None }
        }));
        serde_json::to_string(&Written { events, base_ns: self.base_ns }).unwrap_or_default()
    }
}

/// What metadata events say of a process.
#[derive(Debug, Clone, Default)]
struct Process {
    name: Option<String>,
    /// Kineto names the GPU's process after the program too, and labels it `GPU 0`: the
    /// label tells its lanes from the CPU's, so it is shown instead of the name.
    label: Option<String>,
    sort: Option<f64>,
}

impl Process {
    fn shown(&self) -> Option<String> {
        self.label.clone().or_else(|| self.name.clone())
    }
}

#[derive(Default)]
struct Builder {
    threads: Vec<Thread>,
    by_ids: HashMap<(String, String), usize>,
    /// Thread ids as the file writes them, with their thread's index: most traces have a
    /// handful, so an event's thread is found by comparing these, without making text of its
    /// ids (the first [`RAW_IDS`] kept; any more go through `by_ids`).
    raw_ids: Vec<(Scalar<'static>, Scalar<'static>, usize)>,
    processes: HashMap<String, Process>,
    events: Vec<Event>,
    /// The `B` events still waiting for their `E`, per thread.
    open: HashMap<usize, Vec<(String, String, f64)>>,
}

impl Builder {
    /// Reads a whole trace, handing each timed event to `sink` with the builder (which keeps
    /// the threads); the builder and the base time once read.
    fn stream(reader: impl std::io::Read, mut sink: impl FnMut(&mut Builder, Event)) -> Result<(Builder, Option<f64>), serde_json::Error> {
        let mut builder = Builder::default();
        let base_ns = scan::events(reader, |event| {
            if let Some((_, timed)) = builder.add(event) {
                sink(&mut builder, timed);
            }
        })?;
        Ok((builder, base_ns))
    }

    /// Takes one entry of the file: the timed event it completes, with its thread's index.
    fn add(&mut self, event: RawEvent<'_>) -> Option<(usize, Event)> {
        let Scalar::Text(ph) = &event.ph else { return None };
        let ts = event.ts.number();
        match (ph.as_ref(), ts) {
            ("X", Some(start)) => {
                let dur = event.dur.number().unwrap_or(0.0);
                let thread = self.thread(&event.pid, &event.tid);
                timed(thread, into_text(event.name), into_text(event.cat), start, dur)
            }
            ("B", Some(start)) => {
                let thread = self.thread(&event.pid, &event.tid);
                self.open.entry(thread).or_default().push((into_text(event.name), into_text(event.cat), start));
                None
            }
            ("E", Some(end)) => {
                let thread = self.thread(&event.pid, &event.tid);
                let (name, category, start) = self.open.get_mut(&thread).and_then(Vec::pop)?;
                timed(thread, name, category, start, end - start)
            }
            ("M", _) => {
                self.metadata(&event);
                None
            }
            _ => None,
        }
    }

    /// Names, labels and sort indexes of processes and threads (`process_name`,
    /// `process_labels`, `thread_name`, `process_sort_index`, `thread_sort_index`).
    fn metadata(&mut self, event: &RawEvent<'_>) {
        let (name, sort) = (event.args.name.text(), event.args.sort_index.number());
        match event.name.text().as_deref() {
            Some("thread_name") => {
                let t = self.thread(&event.pid, &event.tid);
                self.threads[t].thread_name = name;
            }
            Some("thread_sort_index") => {
                let t = self.thread(&event.pid, &event.tid);
                self.threads[t].thread_sort = sort;
            }
            Some("process_name") => self.processes.entry(id_of(&event.pid)).or_default().name = name,
            Some("process_labels") => self.processes.entry(id_of(&event.pid)).or_default().label = event.args.labels.text(),
            Some("process_sort_index") => self.processes.entry(id_of(&event.pid)).or_default().sort = sort,
            _ => return,
        }
        // Metadata may come before or after the threads it names.
        let pid = id_of(&event.pid);
        if let Some(process) = self.processes.get(&pid) {
            for thread in self.threads.iter_mut().filter(|t| t.pid == pid) {
                thread.process_name = process.shown();
                thread.process_sort = process.sort;
            }
        }
    }

    /// The index of the thread `(pid, tid)`, adding it the first time.
    fn thread(&mut self, pid: &Scalar<'_>, tid: &Scalar<'_>) -> usize {
        if let Some((.., index)) = self.raw_ids.iter().find(|(p, t, _)| p == pid && t == tid) {
            return *index;
        }
        let index = self.thread_by_text(pid, tid);
        if self.raw_ids.len() < RAW_IDS {
            self.raw_ids.push((pid.clone().into_owned(), tid.clone().into_owned(), index));
        }
        index
    }

    /// The thread whose ids read as `pid` and `tid` do (`7` and `"7"` are one thread).
    fn thread_by_text(&mut self, pid: &Scalar<'_>, tid: &Scalar<'_>) -> usize {
        let key = (id_of(pid), id_of(tid));
        if let Some(&index) = self.by_ids.get(&key) {
            return index;
        }
        let process = self.processes.get(&key.0).cloned().unwrap_or_default();
        let (process_name, process_sort) = (process.shown(), process.sort);
        self.threads.push(Thread { pid: key.0.clone(), tid: key.1.clone(), process_name, process_sort, ..Thread::default() });
        self.by_ids.insert(key, self.threads.len() - 1);
        self.threads.len() - 1
    }
}

/// A timed event as drawn: not one of negative length, nor the profiler's own span.
fn timed(thread: usize, name: String, category: String, start: f64, dur: f64) -> Option<(usize, Event)> {
    (dur >= 0.0 && category != PROFILER_CATEGORY).then_some((thread, Event { thread, name, category, start, dur }))
}

fn into_text(value: Scalar<'_>) -> String {
    match value {
        Scalar::Text(text) => text.into_owned(),
        other => text_of(&other),
    }
}

fn text_of(value: &Scalar<'_>) -> String {
    value.text().unwrap_or_default()
}

/// A process or thread id as text; events without one share the id `?`.
fn id_of(value: &Scalar<'_>) -> String {
    value.text().unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kinetos_object_form_with_its_metadata() {
        let text = r#"{"schemaVersion": 1, "deviceProperties": [],
          "traceEvents": [
            {"ph": "M", "name": "thread_name", "pid": 7, "tid": 9, "args": {"name": "main"}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 9, "ts": 100.5, "dur": 12.5, "args": {"Ev Idx": 3}},
            {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 7, "tid": 9, "ts": 100, "dur": 40},
            {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "scalebook-train"}},
            {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": 1, "ts": 0, "dur": 900},
            {"ph": "s", "id": 1, "pid": 7, "tid": 9, "ts": 101, "cat": "ac2g", "name": "flow"},
            {"ph": "i", "s": "t", "pid": 7, "tid": 9, "ts": 102, "name": "mark"}
          ],
          "traceName": "rank0", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000}"#;
        let trace = Trace::parse(text).unwrap();
        assert_eq!(trace.len(), 2);
        assert_eq!(trace.base_ns, Some(1.7e18));
        let thread = &trace.threads[trace.events[0].thread];
        assert_eq!((thread.pid.as_str(), thread.tid.as_str()), ("7", "9"));
        assert_eq!((thread.thread_name.as_deref(), thread.process_name.as_deref()), (Some("main"), Some("scalebook-train")));
        assert_eq!(trace.events[0], Event { thread: 0, name: "aten::mm".into(), category: "cpu_op".into(), start: 100.5, dur: 12.5 });
    }

    #[test]
    fn a_gpu_process_goes_by_its_label() {
        // Kineto names both processes after the program and labels the device's `GPU 0`.
        let text = r#"{"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "scalebook-train"}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 2},
            {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
            {"ph": "M", "name": "process_name", "pid": 12, "tid": 0, "args": {"name": "scalebook-train"}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 12, "ts": 1, "dur": 9}
          ]}"#;
        let trace = Trace::parse(text).unwrap();
        let process = |i: usize| trace.threads[trace.events[i].thread].process_name.clone();
        assert_eq!((process(0).as_deref(), process(1).as_deref()), (Some("GPU 0"), Some("scalebook-train")));
    }

    #[test]
    fn reads_the_bare_list_form_with_begin_and_end_pairs() {
        let text = r#"[
            {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10},
            {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 15},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 31},
            {"ph": "B", "name": "never ends", "pid": 1, "tid": 2, "ts": 40}
        ]"#;
        let trace = Trace::parse(text).unwrap();
        let spans: Vec<(&str, f64, f64)> = trace.events.iter().map(|e| (e.name.as_str(), e.start, e.dur)).collect();
        assert_eq!(spans, [("inner", 12.0, 3.0), ("outer", 10.0, 20.0)]);
        // The array form may lack its closing bracket.
        let cut = r#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},"#;
        assert_eq!(Trace::parse(cut).unwrap().len(), 1);
    }

    #[test]
    fn odd_values_are_skipped_not_refused() {
        let text = r#"{"traceEvents": [
            3, "text", null, [1, 2],
            {"ph": "X", "name": "ids as text", "pid": "host", "tid": "worker 1", "ts": "5.5", "dur": 1},
            {"ph": "X", "name": {"nested": true}, "pid": [1], "tid": null, "ts": 6, "dur": 2, "args": [1, 2]},
            {"ph": "X", "name": "no time", "pid": 1, "tid": 1, "dur": 3},
            {"ph": "X", "name": "negative", "pid": 1, "tid": 1, "ts": 1, "dur": -3},
            {"ph": "X", "name": "twice", "name": "again", "pid": 1, "tid": 1, "ts": 1, "dur": "lots"},
            {"ph": 5, "name": "odd phase"},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": 42}}
        ]}"#;
        let trace = Trace::parse(text).unwrap();
        let names: Vec<&str> = trace.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["ids as text", "", "again"]);
        assert_eq!(trace.events[0].start, 5.5);
        assert_eq!(trace.threads[trace.events[1].thread].pid, "?");
        assert_eq!(trace.threads.iter().find(|t| t.tid == "1").unwrap().thread_name.as_deref(), Some("42"));
    }

    #[test]
    fn a_trace_written_as_json_reads_back_as_it_was() {
        let text = r#"{"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "gemm \"big\"", "pid": 0, "tid": 7, "ts": 5.25, "dur": 2},
            {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
            {"ph": "M", "name": "process_sort_index", "pid": 0, "args": {"sort_index": 3}},
            {"ph": "M", "name": "thread_name", "pid": "host", "tid": "w1", "args": {"name": "worker"}},
            {"ph": "M", "name": "thread_sort_index", "pid": "host", "tid": "w1", "args": {"sort_index": 2}},
            {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": "host", "tid": "w1", "ts": 1, "dur": 9},
            {"ph": "X", "name": "no category", "pid": "host", "tid": "w2", "ts": 3, "dur": 0}
          ], "baseTimeNanoseconds": 1700000000000000000}"#;
        let trace = Trace::parse(text).unwrap();
        assert_eq!(trace.threads.len(), 3);
        let written = trace.to_json();
        assert_eq!(Trace::parse(&written).unwrap(), trace);
        assert!(written.starts_with(r#"{"traceEvents":[{"ph":"M","name":"thread_name""#), "{written}");
    }

    #[test]
    fn text_that_is_no_trace_is_an_error() {
        for text in ["", "not json", "{\"events\": []}", "{\"traceEvents\": 3}", "42"] {
            assert!(Trace::parse(text).is_err(), "{text}");
        }
        assert!(Trace::parse("[]").unwrap().is_empty());
        assert!(Trace::parse("[1, 2").unwrap().is_empty());
    }
}
