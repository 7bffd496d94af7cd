//! Pipeline schedules, simulated: `p` stages, a batch cut into `m` micro-batches, each forward
//! or backward pass of a micro-batch on a stage one time unit. A stage runs its passes in its
//! schedule's order, each as soon as the stage is free and the pass it needs is done (the
//! forward of the stage before, the backward of the stage after). Two schedules:
//!
//! - **GPipe**: every micro-batch forward, then every one backward. A stage keeps the
//!   activations of all `m` micro-batches until their backward passes.
//! - **1F1B** (PipeDream-Flush): stage `s` runs `p − s − 1` forwards to fill the pipeline, then
//!   alternates one forward and one backward. The step takes as long, with the same bubble, but a
//!   stage never holds more than `p − s` micro-batches' activations.
//! - **Interleaved 1F1B** (Megatron-LM's): the model cut into `v·p` chunks, rank `r` holding
//!   chunks `r, r + p, …` (`v` virtual stages each), so a pass is `1/v` as long; micro-batches go
//!   through in groups of `p`, one chunk after another, with more forwards to fill the pipeline
//!   (`2(p − r − 1) + (v − 1)p`), then one forward and one backward. It needs `m` divisible by
//!   `p`, and sends `v` times as many activations between ranks.
//!
//! GPipe and 1F1B idle `(p − 1) / (m + p − 1)` of the time: the bubble; interleaving cuts it to
//! `(p − 1) / (v·m + p − 1)`.

/// One forward or backward pass of a micro-batch on a stage, in time units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pass {
    /// The rank (GPU) that runs it.
    pub stage: usize,
    /// The model chunk it runs: `stage` itself, or for an interleaved schedule one of the rank's
    /// virtual stages (`stage + k·p`).
    pub chunk: usize,
    pub micro_batch: usize,
    pub backward: bool,
    pub start: f64,
    pub length: f64,
}

impl Pass {
    pub fn end(&self) -> f64 {
        self.start + self.length
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    GPipe,
    OneFOneB,
    /// Interleaved 1F1B with this many virtual stages (model chunks) per rank, 2 or more.
    Interleaved(usize),
}

/// A pass in a stage's order: (its chunk among the stage's own, micro-batch, backward). The
/// trainer runs a stage's passes in this order, so the picture and the run are one schedule.
pub type Step = (usize, usize, bool);

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::GPipe => "GPipe",
            Schedule::OneFOneB => "1F1B",
            Schedule::Interleaved(_) => "interleaved 1F1B",
        }
    }

    /// Model chunks per rank: 1, or the interleaved schedule's virtual stages.
    pub fn virtual_stages(self) -> usize {
        match self {
            Schedule::Interleaved(v) => v.max(1),
            _ => 1,
        }
    }

    /// Whether the schedule can run `micro_batches` on `stages` stages: interleaving takes the
    /// micro-batches in groups of one per stage, so their count must divide by the stages.
    pub fn runs(self, stages: usize, micro_batches: usize) -> bool {
        !matches!(self, Schedule::Interleaved(_)) || micro_batches.is_multiple_of(stages)
    }

    /// Stage `stage`'s passes in the order it runs them.
    pub fn order(self, stages: usize, micro_batches: usize, stage: usize) -> Vec<Step> {
        let v = self.virtual_stages();
        let total = micro_batches * v;
        let warm_up = match self {
            Schedule::GPipe => total,
            Schedule::OneFOneB => stages - stage - 1,
            Schedule::Interleaved(_) => 2 * (stages - stage - 1) + (v - 1) * stages,
        }
        .min(total);
        // The k-th forward (and backward) of the stage: micro-batches in groups of `p`, each
        // group through every chunk in turn (backwards through the chunks in reverse).
        let group = stages * v;
        let nth = |k: usize, backward: bool| {
            let local = (k % group) / stages;
            let chunk = if backward { v - 1 - local } else { local };
            let micro_batch = if v == 1 { k } else { (k / group) * stages + k % stages };
            (chunk, micro_batch, backward)
        };
        let mut order: Vec<Step> = (0..warm_up).map(|k| nth(k, false)).collect();
        for k in warm_up..total {
            order.push(nth(k, false));
            order.push(nth(k - warm_up, true));
        }
        order.extend((total - warm_up..total).map(|k| nth(k, true)));
        order
    }
}

/// The blocks of each model chunk when `depth` blocks are cut into `chunks` runs of
/// consecutive blocks, chunk `c` on rank `c mod p`. Uneven depths give the later chunks one
/// block more: the first stage holds the most micro-batches' activations under 1F1B, the last
/// already holds the head. Empty when there are more chunks than blocks.
pub fn chunk_blocks(depth: usize, chunks: usize) -> Vec<std::ops::Range<usize>> {
    if chunks == 0 || chunks > depth {
        return Vec::new();
    }
    let (base, extra) = (depth / chunks, depth % chunks);
    let mut start = 0;
    (0..chunks)
        .map(|c| {
            let len = base + usize::from(c >= chunks - extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// Every pass of `schedule` with `stages` stages and `micro_batches` micro-batches, each pass
/// of a whole stage `length` units long (a chunk's, `length / v`). Empty when the schedule
/// cannot run them ([`Schedule::runs`]).
pub fn simulate(schedule: Schedule, stages: usize, micro_batches: usize, length: f64) -> Vec<Pass> {
    if !schedule.runs(stages, micro_batches) {
        return Vec::new();
    }
    let v = schedule.virtual_stages();
    let (chunks, length) = (stages * v, length / v as f64);
    let orders: Vec<Vec<Step>> = (0..stages).map(|s| schedule.order(stages, micro_batches, s)).collect();
    let mut next = vec![0usize; stages];
    let mut free = vec![0.0f64; stages];
    // When each pass ended, by (chunk, micro-batch, backward).
    let mut done = vec![[None::<f64>; 2]; chunks * micro_batches];
    let mut passes = Vec::with_capacity(2 * chunks * micro_batches);
    while passes.len() < 2 * chunks * micro_batches {
        let before = passes.len();
        for stage in 0..stages {
            let Some(&(local, micro_batch, backward)) = orders[stage].get(next[stage]) else { continue };
            let chunk = local * stages + stage;
            let needed = match (backward, chunk) {
                (false, 0) => Some(0.0),
                (false, c) => done[(c - 1) * micro_batches + micro_batch][0],
                (true, c) if c == chunks - 1 => done[c * micro_batches + micro_batch][0],
                (true, c) => done[(c + 1) * micro_batches + micro_batch][1],
            };
            let Some(ready) = needed else { continue };
            let start = free[stage].max(ready);
            let pass = Pass { stage, chunk, micro_batch, backward, start, length };
            free[stage] = pass.end();
            done[chunk * micro_batches + micro_batch][usize::from(backward)] = Some(pass.end());
            next[stage] += 1;
            passes.push(pass);
        }
        // Every schedule here can always go on; a stall would be a bug in an order above.
        if passes.len() == before {
            break;
        }
    }
    passes
}

/// When the last pass ends.
pub fn duration(passes: &[Pass]) -> f64 {
    passes.iter().map(Pass::end).fold(0.0, f64::max)
}

/// The stretches of `[0, end)` in which `stage` runs no pass.
pub fn idle(passes: &[Pass], stage: usize, end: f64) -> Vec<(f64, f64)> {
    let mut busy: Vec<(f64, f64)> = passes.iter().filter(|p| p.stage == stage).map(|p| (p.start, p.end())).collect();
    busy.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut gaps = Vec::new();
    let mut at = 0.0;
    for (start, stop) in busy.into_iter().chain([(end, end)]) {
        if start > at {
            gaps.push((at, start));
        }
        at = f64::max(at, stop);
    }
    gaps
}

/// The share of all stages' time spent idle.
pub fn idle_share(passes: &[Pass], stages: usize) -> f64 {
    let end = duration(passes);
    let idle: f64 = (0..stages).flat_map(|s| idle(passes, s, end)).map(|(a, b)| b - a).sum();
    idle / (end * stages as f64)
}

/// The most micro-batches whose activations `stage` holds at once: forwards done whose
/// backward has not ended.
pub fn peak_held(passes: &[Pass], stage: usize) -> usize {
    let mut events: Vec<(f64, i32)> =
        passes.iter().filter(|p| p.stage == stage).map(|p| if p.backward { (p.end(), -1) } else { (p.start, 1) }).collect();
    // At one instant, a backward that ends frees before a forward that starts takes.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut held, mut peak) = (0i32, 0i32);
    for (_, change) in events {
        held += change;
        peak = peak.max(held);
    }
    peak as usize
}

/// `(p−1)/(m+p−1) = 3/7 ≈ 43%`: the fraction reduced, and its percentage.
pub fn bubble_text(stages: usize, micro_batches: usize) -> String {
    format!("bubble (p−1)/(m+p−1) = {} (p = {stages}, m = {micro_batches})", fraction(stages - 1, micro_batches + stages - 1))
}

/// Interleaving's bubble with `v` virtual stages: `(p−1)/(v·m+p−1) = 3/19 ≈ 16%`.
pub fn interleaved_bubble_text(stages: usize, micro_batches: usize, v: usize) -> String {
    let fraction = bubble_fraction(stages, micro_batches, v);
    format!("bubble (p−1)/(v·m+p−1) = {fraction} (p = {stages}, m = {micro_batches}, v = {v})")
}

/// The interleaved schedule's idle share, (p−1)/(v·m+p−1), reduced and in percent.
pub fn bubble_fraction(stages: usize, micro_batches: usize, v: usize) -> String {
    fraction(stages - 1, v * micro_batches + stages - 1)
}

/// `top/bottom` reduced, and its percentage (`=` when it is whole, else `≈`).
fn fraction(top: usize, bottom: usize) -> String {
    let divisor = gcd(top, bottom);
    let percent = 100.0 * top as f64 / bottom as f64;
    let sign = if (100 * top).is_multiple_of(bottom) { "=" } else { "≈" };
    format!("{}/{} {sign} {percent:.0}%", top / divisor, bottom / divisor)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(passes: &[Pass], stage: usize, micro_batch: usize, backward: bool) -> Pass {
        *passes.iter().find(|p| (p.stage, p.micro_batch, p.backward) == (stage, micro_batch, backward)).unwrap()
    }

    #[test]
    fn chunks_hold_consecutive_blocks_and_the_later_ones_take_the_remainder() {
        assert_eq!(chunk_blocks(12, 4), [0..3, 3..6, 6..9, 9..12]);
        assert_eq!(chunk_blocks(5, 2), [0..2, 2..5]);
        assert_eq!(chunk_blocks(7, 3), [0..2, 2..4, 4..7]);
        assert!(chunk_blocks(2, 3).is_empty());
        assert!(chunk_blocks(2, 0).is_empty());
    }

    #[test]
    fn each_pass_waits_for_the_one_it_needs_and_a_stage_runs_one_at_a_time() {
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            for (stages, micro_batches) in [(4, 4), (4, 8), (2, 1), (8, 3)] {
                let passes = simulate(schedule, stages, micro_batches, 1.0);
                assert_eq!(passes.len(), 2 * stages * micro_batches, "{schedule:?} p {stages} m {micro_batches}");
                for p in &passes {
                    let needed = match (p.backward, p.stage) {
                        (false, 0) => None,
                        (false, s) => Some(find(&passes, s - 1, p.micro_batch, false)),
                        (true, s) if s == stages - 1 => Some(find(&passes, s, p.micro_batch, false)),
                        (true, s) => Some(find(&passes, s + 1, p.micro_batch, true)),
                    };
                    assert!(needed.is_none_or(|n| p.start >= n.end()), "{schedule:?}: {p:?}");
                    let overlapping = passes.iter().filter(|q| q.stage == p.stage && q.start < p.end() && p.start < q.end()).count();
                    assert_eq!(overlapping, 1, "{schedule:?}: {p:?}");
                }
            }
        }
    }

    #[test]
    fn both_schedules_idle_the_bubble_fraction_of_the_time() {
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            for (micro_batches, fraction) in [(4, 3.0 / 7.0), (8, 3.0 / 11.0), (32, 3.0 / 35.0), (1, 3.0 / 4.0)] {
                let passes = simulate(schedule, 4, micro_batches, 1.0);
                assert!((idle_share(&passes, 4) - fraction).abs() < 1e-12, "{schedule:?} m {micro_batches}");
                assert_eq!(duration(&passes), 2.0 * (micro_batches + 3) as f64);
            }
        }
        assert_eq!(bubble_text(4, 8), "bubble (p−1)/(m+p−1) = 3/11 ≈ 27% (p = 4, m = 8)");
        assert_eq!(bubble_text(4, 32), "bubble (p−1)/(m+p−1) = 3/35 ≈ 9% (p = 4, m = 32)");
    }

    #[test]
    fn interleaving_cuts_the_bubble_by_the_virtual_stages() {
        for (stages, micro_batches, v) in [(4, 8, 2), (4, 4, 2), (2, 4, 3), (4, 16, 4)] {
            let passes = simulate(Schedule::Interleaved(v), stages, micro_batches, 1.0);
            assert_eq!(passes.len(), 2 * stages * v * micro_batches);
            let expected = (stages - 1) as f64 / (v * micro_batches + stages - 1) as f64;
            assert!((idle_share(&passes, stages) - expected).abs() < 1e-12, "p {stages} m {micro_batches} v {v}");
            for p in &passes {
                assert_eq!(p.chunk % stages, p.stage, "{p:?} is not on the rank holding its chunk");
                let overlapping = passes.iter().filter(|q| q.stage == p.stage && q.start < p.end() && p.start < q.end()).count();
                assert_eq!(overlapping, 1, "{p:?}");
            }
        }
        assert_eq!(interleaved_bubble_text(4, 8, 2), "bubble (p−1)/(v·m+p−1) = 3/19 ≈ 16% (p = 4, m = 8, v = 2)");
        assert!(simulate(Schedule::Interleaved(2), 4, 6, 1.0).is_empty(), "m must divide by p");
        // The longer warm-up (10 forwards, then one more before the first backward): GPU 0 holds 11
        // half-stage chunks, 5.5 micro-batches' worth, where 1F1B holds 4.
        assert_eq!(peak_held(&simulate(Schedule::Interleaved(2), 4, 8, 1.0), 0), 11);
    }

    #[test]
    fn one_f_one_b_holds_at_most_p_minus_s_micro_batches_where_gpipe_holds_all() {
        let (stages, micro_batches) = (4, 8);
        let gpipe = simulate(Schedule::GPipe, stages, micro_batches, 1.0);
        let one_f_one_b = simulate(Schedule::OneFOneB, stages, micro_batches, 1.0);
        for stage in 0..stages {
            assert_eq!(peak_held(&gpipe, stage), micro_batches);
            assert_eq!(peak_held(&one_f_one_b, stage), stages - stage, "stage {stage}");
        }
    }
}
