//! The ranks' traces on one clock, as lanes: per rank its ranges on top, then one lane per
//! process and thread; each lane split into rows by nesting depth, so an op sits one row
//! below the op that called it, as in every trace viewer.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use super::RANGE_CATEGORY;
use super::read::{Thread, Trace};
use super::window::Window;

/// Rows deeper than this share the last one: enough for any real call stack, and a bound on
/// the height a malformed trace can make a lane.
const MAX_DEPTH: usize = 32;

/// How much a child may start before its parent ended and still count as its sibling (µs):
/// the files round times to the nanosecond.
const ROUNDING: f64 = 1e-3;

/// An op's or a range's name with its category, interned: the timeline stores each once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId(u32);

/// One drawn event: when it ran (µs from the timeline's start), its name, and its self time
/// (its duration less the time of the events nested in it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: f64,
    pub end: f64,
    pub name: NameId,
    pub self_time: f64,
}

impl Span {
    pub fn duration(&self) -> f64 {
        self.end - self.start
    }
}

/// The events of one nesting depth of a lane, in start order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    spans: Vec<Span>,
    /// `reach[i]`: the latest end among `spans[..=i]`, so the spans overlapping a window are
    /// found by binary search even where events are not strictly nested.
    reach: Vec<f64>,
}

impl Row {
    fn new(spans: Vec<Span>) -> Row {
        let reach = spans
            .iter()
            .scan(f64::NEG_INFINITY, |latest, s| {
                *latest = latest.max(s.end);
                Some(*latest)
            })
            .collect();
        Row { spans, reach }
    }

    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The spans that overlap `[from, to)` (a zero-length span at `from` included), in start
    /// order.
    pub fn overlapping(&self, from: f64, to: f64) -> impl Iterator<Item = &Span> {
        let first = self.reach.partition_point(|&end| end < from);
        let last = self.spans.partition_point(|s| s.start < to);
        self.spans[first..last.max(first)].iter().filter(move |s| s.end >= from)
    }
}

/// What a lane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LaneKind {
    /// The ranges the program marked (the trainer's data wait, forward, backward, ...).
    Ranges,
    /// What one thread of one process ran.
    Thread,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub rank: usize,
    pub kind: LaneKind,
    /// The thread as its metadata names it (`ranges` for the ranges lane).
    pub label: String,
    /// Row `d` holds the events at nesting depth `d`.
    pub rows: Vec<Row>,
}

/// Every rank's lanes, ranks in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    names: Vec<(String, String)>,
    lanes: Vec<Lane>,
    end: f64,
    /// Each rank's file's clock minus this one's (µs): its base-time shift less the origin.
    offsets: Vec<(usize, f64)>,
}

/// An event on its way into a lane.
struct Pending {
    start: f64,
    end: f64,
    name: NameId,
}

/// Which lane an event goes to, in the order lanes are shown.
#[derive(Debug, Clone, PartialEq)]
struct LaneKey {
    rank: usize,
    kind: LaneKind,
    thread: Option<Thread>,
}

impl Timeline {
    /// The timeline of `traces`, each with its rank. Kineto counts each file's timestamps from
    /// its own base time; when every file gives one, the ranks are lined up by it, so a
    /// collective shows at the same moment on every rank.
    pub fn new(traces: impl IntoIterator<Item = (usize, Trace)>) -> Timeline {
        let mut traces: Vec<(usize, Trace)> = traces.into_iter().collect();
        traces.sort_by_key(|(rank, _)| *rank);
        let bases: Option<Vec<f64>> = traces.iter().map(|(_, t)| t.base_ns).collect();
        let earliest_base = bases.as_ref().and_then(|b| b.iter().copied().reduce(f64::min));
        let mut names = Names::default();
        let mut lanes: Vec<(LaneKey, Vec<Pending>)> = Vec::new();
        let mut index: HashMap<(usize, Option<usize>), usize> = HashMap::new();
        let mut shifts = Vec::new();
        for (rank, trace) in traces {
            let shift = match (trace.base_ns, earliest_base) {
                (Some(base), Some(earliest)) => (base - earliest) / 1000.0,
                _ => 0.0,
            };
            shifts.push((rank, shift));
            for event in trace.events {
                let ranges = event.category == RANGE_CATEGORY;
                let thread = (!ranges).then_some(event.thread);
                let slot = *index.entry((rank, thread)).or_insert_with(|| {
                    let kind = if ranges { LaneKind::Ranges } else { LaneKind::Thread };
                    lanes.push((LaneKey { rank, kind, thread: thread.map(|t| trace.threads[t].clone()) }, Vec::new()));
                    lanes.len() - 1
                });
                let start = event.start + shift;
                lanes[slot].1.push(Pending { start, end: start + event.dur, name: names.id(event.name, event.category) });
            }
        }
        lanes.sort_by(|(a, _), (b, _)| lane_order(a, b));
        let mut processes: HashMap<usize, HashSet<&str>> = HashMap::new();
        for (key, _) in &lanes {
            processes.entry(key.rank).or_default().extend(key.thread.as_ref().map(|t| t.pid.as_str()));
        }
        let several: HashSet<usize> = processes.into_iter().filter(|(_, pids)| pids.len() > 1).map(|(rank, _)| rank).collect();
        let origin = lanes.iter().flat_map(|(_, events)| events.iter().map(|e| e.start)).reduce(f64::min).unwrap_or(0.0);
        let mut end: f64 = 0.0;
        let lanes = lanes
            .into_iter()
            .map(|(key, mut events)| {
                for e in &mut events {
                    e.start -= origin;
                    e.end -= origin;
                    end = end.max(e.end);
                }
                Lane { rank: key.rank, kind: key.kind, label: label(&key, several.contains(&key.rank)), rows: nest(events) }
            })
            .collect();
        let offsets = shifts.into_iter().map(|(rank, shift)| (rank, origin - shift)).collect();
        Timeline { names: names.list, lanes, end, offsets }
    }

    /// Where `window` of this timeline lies in the clock of rank `rank`'s own file (its
    /// timestamps as written): what an excerpt of that file is asked for.
    pub fn file_window(&self, rank: usize, window: Window) -> Window {
        let offset = self.offsets.iter().find(|(r, _)| *r == rank).map_or(0.0, |(_, offset)| *offset);
        Window::new(window.start + offset, window.end + offset)
    }

    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    pub fn name(&self, id: NameId) -> &str {
        self.names.get(id.0 as usize).map_or("", |(name, _)| name)
    }

    pub fn category(&self, id: NameId) -> &str {
        self.names.get(id.0 as usize).map_or("", |(_, category)| category)
    }

    /// Every name with its category, by id.
    pub(super) fn names(&self) -> impl Iterator<Item = (NameId, &str, &str)> {
        self.names.iter().zip(0u32..).map(|((name, category), id)| (NameId(id), name.as_str(), category.as_str()))
    }

    /// From the first event's start (0) to the last one's end.
    pub fn bounds(&self) -> Window {
        Window::new(0.0, self.end)
    }

    /// The ranks it holds, in order.
    pub fn ranks(&self) -> Vec<usize> {
        let mut ranks: Vec<usize> = self.lanes.iter().map(|l| l.rank).collect();
        ranks.dedup();
        ranks
    }

    /// The names in `rank`'s ranges lane, each once, sorted.
    pub fn range_names(&self, rank: usize) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .lanes
            .iter()
            .filter(|l| l.rank == rank && l.kind == LaneKind::Ranges)
            .flat_map(|l| l.rows.iter().flat_map(|r| r.spans.iter().map(|s| self.name(s.name))))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }
}

#[derive(Default)]
struct Names {
    list: Vec<(String, String)>,
    ids: HashMap<(String, String), NameId>,
}

impl Names {
    fn id(&mut self, name: String, category: String) -> NameId {
        let key = (name, category);
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        // More distinct names than u32 counts cannot come from a file a browser can hold.
        let id = NameId(self.list.len() as u32);
        self.list.push(key.clone());
        self.ids.insert(key, id);
        id
    }
}

/// Ranks in order; in a rank, its ranges first, then processes and threads by the sort
/// indexes their metadata gives, then by id (numerically when the ids are numbers).
fn lane_order(a: &LaneKey, b: &LaneKey) -> Ordering {
    // A thread without a sort index sorts by its id, as Kineto's own indexes are the ids.
    let number = |id: &str| id.parse::<f64>().unwrap_or(f64::MAX);
    let sort_of = |key: &LaneKey| {
        key.thread.as_ref().map(|t| (t.process_sort.unwrap_or_else(|| number(&t.pid)), t.thread_sort.unwrap_or_else(|| number(&t.tid))))
    };
    a.rank.cmp(&b.rank).then(a.kind.cmp(&b.kind)).then_with(|| match (&a.thread, &b.thread, sort_of(a), sort_of(b)) {
        (Some(x), Some(y), Some((xp, xt)), Some((yp, yt))) => {
            xp.total_cmp(&yp).then_with(|| id_order(&x.pid, &y.pid)).then(xt.total_cmp(&yt)).then_with(|| id_order(&x.tid, &y.tid))
        }
        _ => Ordering::Equal,
    })
}

fn id_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.total_cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// A lane's name: the thread's, after its process's where the rank traced several processes
/// (a GPU's streams are a process of their own in Kineto's traces).
fn label(key: &LaneKey, several_processes: bool) -> String {
    let Some(thread) = &key.thread else { return "ranges".into() };
    let name = thread.thread_name.clone().unwrap_or_else(|| format!("thread {}", thread.tid));
    match (&thread.process_name, several_processes) {
        (Some(process), true) => format!("{process} · {name}"),
        (None, true) => format!("process {} · {name}", thread.pid),
        (_, false) => name,
    }
}

/// Splits a lane's events into rows and works out each event's self time. Events are taken
/// by start, the longer first where two start together, and each goes to the lowest row that
/// is free when it starts: for calls on one thread that is one row below the call it is
/// nested in, and an event that overlaps another without being inside it (ranges of two
/// threads in a rank's ranges lane) gets a row beside it instead of passing for its child.
fn nest(mut events: Vec<Pending>) -> Vec<Row> {
    events.sort_by(|a, b| a.start.total_cmp(&b.start).then(b.end.total_cmp(&a.end)));
    let mut rows: Vec<Vec<Span>> = Vec::new();
    for e in events {
        let free = rows.iter().position(|row| row.last().is_none_or(|last| last.end <= e.start + ROUNDING));
        let depth = free.unwrap_or(rows.len()).min(MAX_DEPTH - 1);
        if let Some(parent) = depth.checked_sub(1).and_then(|above| rows[above].last_mut())
            && parent.start <= e.start
            && e.end <= parent.end + ROUNDING
        {
            parent.self_time -= e.end - e.start;
        }
        if rows.len() == depth {
            rows.push(Vec::new());
        }
        rows[depth].push(Span { start: e.start, end: e.end, name: e.name, self_time: e.end - e.start });
    }
    rows.into_iter()
        .map(|mut spans| {
            for s in &mut spans {
                s.self_time = s.self_time.max(0.0);
            }
            Row::new(spans)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(base_ns: Option<u64>, events: &str) -> Trace {
        let base = base_ns.map(|b| format!(", \"baseTimeNanoseconds\": {b}")).unwrap_or_default();
        Trace::parse(&format!("{{\"traceEvents\": [{events}]{base}}}")).unwrap()
    }

    fn x(name: &str, cat: &str, tid: u32, ts: f64, dur: f64) -> String {
        format!(r#"{{"ph": "X", "name": "{name}", "cat": "{cat}", "pid": 1, "tid": {tid}, "ts": {ts}, "dur": {dur}}},"#)
    }

    fn rank(events: &[String]) -> String {
        events.concat().trim_end_matches(',').to_owned()
    }

    #[test]
    fn ranges_go_on_top_and_ops_nest_in_rows() {
        let events = rank(&[
            x("forward", RANGE_CATEGORY, 1, 100.0, 50.0),
            x("aten::linear", "cpu_op", 1, 101.0, 20.0),
            x("aten::addmm", "cpu_op", 1, 102.0, 15.0),
            x("aten::relu", "cpu_op", 1, 125.0, 5.0),
            x("loader", "cpu_op", 2, 90.0, 10.0),
            r#"{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "data worker"}}"#.to_owned(),
        ]);
        let timeline = Timeline::new([(0, trace(None, &events))]);
        let lanes = timeline.lanes();
        let kinds: Vec<(LaneKind, &str)> = lanes.iter().map(|l| (l.kind, l.label.as_str())).collect();
        assert_eq!(kinds, [(LaneKind::Ranges, "ranges"), (LaneKind::Thread, "thread 1"), (LaneKind::Thread, "data worker")]);
        let ops = &lanes[1];
        assert_eq!(ops.rows.len(), 2);
        let names = |row: &Row| row.spans().iter().map(|s| timeline.name(s.name).to_owned()).collect::<Vec<_>>();
        assert_eq!(names(&ops.rows[0]), ["aten::linear", "aten::relu"]);
        assert_eq!(names(&ops.rows[1]), ["aten::addmm"]);
        // Times count from the earliest event (the loader at 90).
        assert_eq!((ops.rows[0].spans()[0].start, timeline.bounds().end), (11.0, 60.0));
        // Self time: the linear's 20 µs less the addmm's 15.
        assert_eq!(ops.rows[0].spans()[0].self_time, 5.0);
        assert_eq!(timeline.range_names(0), ["forward"]);
        assert_eq!(timeline.category(ops.rows[1].spans()[0].name), "cpu_op");
    }

    #[test]
    fn ranks_line_up_by_their_base_times_and_sort_in_order() {
        let one = trace(Some(1_000_000), &rank(&[x("step 1", RANGE_CATEGORY, 1, 10.0, 5.0)]));
        let zero = trace(Some(0), &rank(&[x("step 1", RANGE_CATEGORY, 1, 500.0, 5.0)]));
        let timeline = Timeline::new([(1, one), (0, zero)]);
        assert_eq!(timeline.ranks(), [0, 1]);
        // Rank 1's base is 1 ms later: its 10 µs is 1010 µs on rank 0's clock.
        let starts: Vec<f64> = timeline.lanes().iter().map(|l| l.rows[0].spans()[0].start).collect();
        assert_eq!(starts, [0.0, 510.0]);
    }

    #[test]
    fn overlapping_ranges_of_two_threads_sit_side_by_side_not_nested() {
        let events = rank(&[
            x("step 3", RANGE_CATEGORY, 1, 0.0, 100.0),
            x("forward", RANGE_CATEGORY, 2, 10.0, 40.0),
            x("forward", RANGE_CATEGORY, 3, 30.0, 40.0),
            x("backward", RANGE_CATEGORY, 2, 50.0, 40.0),
        ]);
        let timeline = Timeline::new([(0, trace(None, &events))]);
        let rows: Vec<Vec<&str>> =
            timeline.lanes()[0].rows.iter().map(|r| r.spans().iter().map(|s| timeline.name(s.name)).collect()).collect();
        assert_eq!(rows, [vec!["step 3"], vec!["forward", "backward"], vec!["forward"]]);
        // The step's self time leaves out the ranges of the row under it.
        assert_eq!(timeline.lanes()[0].rows[0].spans()[0].self_time, 100.0 - 40.0 - 40.0);
    }

    #[test]
    fn lanes_name_their_process_only_when_a_rank_has_several() {
        let meta = r#"{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},"#;
        let gpu = format!(r#"{meta}{{"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 5, "dur": 1}},"#);
        let cpu = x("aten::mm", "cpu_op", 9, 1.0, 10.0);
        let timeline = Timeline::new([(0, trace(None, &rank(&[cpu.clone(), gpu]))), (1, trace(None, &rank(&[cpu])))]);
        let labels: Vec<(usize, &str)> = timeline.lanes().iter().map(|l| (l.rank, l.label.as_str())).collect();
        assert_eq!(labels, [(0, "GPU 0 · thread 7"), (0, "process 1 · thread 9"), (1, "thread 9")]);
    }

    #[test]
    fn siblings_that_touch_stay_on_one_row() {
        let events = rank(&[x("a", "cpu_op", 1, 0.0, 10.0), x("b", "cpu_op", 1, 10.0, 10.0), x("c", "cpu_op", 1, 19.9999, 1.0)]);
        let timeline = Timeline::new([(0, trace(None, &events))]);
        assert_eq!(timeline.lanes()[0].rows.len(), 1);
    }

    #[test]
    fn overlapping_finds_spans_across_a_window_edge() {
        let row = Row::new(vec![
            Span { start: 0.0, end: 100.0, name: NameId(0), self_time: 0.0 },
            Span { start: 10.0, end: 20.0, name: NameId(1), self_time: 0.0 },
            Span { start: 150.0, end: 160.0, name: NameId(2), self_time: 0.0 },
        ]);
        let found = |from, to| row.overlapping(from, to).map(|s| s.name.0).collect::<Vec<_>>();
        assert_eq!(found(50.0, 155.0), [0, 2]);
        assert_eq!(found(120.0, 140.0), Vec::<u32>::new());
        assert_eq!(found(0.0, 1000.0), [0, 1, 2]);
        assert_eq!(found(170.0, 160.0), Vec::<u32>::new());
    }

    #[test]
    fn a_deep_malformed_stack_is_capped() {
        let events: Vec<String> = (0..100).map(|i| x("deep", "cpu_op", 1, f64::from(i), 1000.0)).collect();
        let timeline = Timeline::new([(0, trace(None, &rank(&events)))]);
        assert_eq!(timeline.lanes()[0].rows.len(), MAX_DEPTH);
        assert!(Timeline::new([(0, trace(None, ""))]).is_empty());
    }
}
