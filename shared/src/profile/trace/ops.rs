//! The ops table: every op of the threads' lanes summed by name over all ranks, the view
//! PyTorch's `key_averages()` gives. Total time counts an op with what it called (so
//! `aten::linear` includes its `aten::addmm`); self time leaves the callees out, and its sum
//! over the table is the time the threads spent in ops at all.

use std::collections::HashMap;

use super::marks_a_range;
use super::timeline::{LaneKind, NameId, Timeline};

#[derive(Debug, Clone, PartialEq)]
pub struct OpStat {
    pub name: String,
    pub category: String,
    pub count: usize,
    /// Microseconds, summed over every call on every rank.
    pub total: f64,
    pub self_time: f64,
}

impl OpStat {
    /// The mean duration of one call (µs).
    pub fn mean(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.total / self.count as f64 }
    }
}

/// What the table is sorted by, largest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpOrder {
    Total,
    SelfTime,
    Count,
    Mean,
}

impl OpOrder {
    fn key(self, op: &OpStat) -> f64 {
        match self {
            OpOrder::Total => op.total,
            OpOrder::SelfTime => op.self_time,
            OpOrder::Count => op.count as f64,
            OpOrder::Mean => op.mean(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpsTable {
    rows: Vec<OpStat>,
}

impl OpsTable {
    /// The ops of `timeline`'s thread lanes. Ranges (the trainer's, and their copies on a
    /// GPU's streams, `gpu_user_annotation`) are marks around ops, not ops, and stay out.
    pub fn new(timeline: &Timeline) -> OpsTable {
        let mut sums: HashMap<NameId, (usize, f64, f64)> = HashMap::new();
        let spans = timeline.lanes().iter().filter(|l| l.kind == LaneKind::Thread).flat_map(|l| l.rows.iter().flat_map(|r| r.spans()));
        for span in spans {
            let sum = sums.entry(span.name).or_default();
            sum.0 += 1;
            sum.1 += span.duration();
            sum.2 += span.self_time;
        }
        let rows = timeline
            .names()
            .filter(|(_, _, category)| !marks_a_range(category))
            .filter_map(|(id, name, category)| {
                let &(count, total, self_time) = sums.get(&id)?;
                Some(OpStat { name: name.to_owned(), category: category.to_owned(), count, total, self_time })
            })
            .collect();
        OpsTable { rows }
    }

    /// Every op, sorted by `order` (largest first, then by name).
    pub fn sorted(&self, order: OpOrder) -> Vec<&OpStat> {
        let mut rows: Vec<&OpStat> = self.rows.iter().collect();
        rows.sort_by(|a, b| order.key(b).total_cmp(&order.key(a)).then_with(|| a.name.cmp(&b.name)));
        rows
    }

    /// The time spent in ops at all (the sum of self times, µs): what a share is a share of.
    pub fn busy(&self) -> f64 {
        self.rows.iter().map(|r| r.self_time).sum()
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Trace;
    use super::*;

    #[test]
    fn ops_sum_over_calls_and_ranks_without_the_ranges() {
        let events = r#"{"traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
            {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 0, "tid": 7, "ts": 0, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 30},
            {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 5, "dur": 20},
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 40, "dur": 10},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 3, "dur": 4}
        ]}"#;
        let timeline = Timeline::new([(0, Trace::parse(events).unwrap()), (1, Trace::parse(events).unwrap())]);
        let table = OpsTable::new(&timeline);
        let rows: Vec<(&str, usize, f64, f64)> =
            table.sorted(OpOrder::Total).iter().map(|r| (r.name.as_str(), r.count, r.total, r.self_time)).collect();
        assert_eq!(rows, [("aten::linear", 4, 80.0, 40.0), ("aten::addmm", 2, 40.0, 40.0), ("gemm", 2, 8.0, 8.0)]);
        assert_eq!(table.sorted(OpOrder::SelfTime)[0].name, "aten::addmm");
        assert_eq!(table.sorted(OpOrder::Mean)[0].name, "aten::addmm");
        assert_eq!(table.sorted(OpOrder::Count)[0].name, "aten::linear");
        assert_eq!(table.sorted(OpOrder::Total)[0].mean(), 20.0);
        assert_eq!(table.busy(), 88.0);
        assert_eq!(table.sorted(OpOrder::Total)[2].category, "kernel");
    }
}
