//! The four collectives the tutorial's parallelism runs on, over four ranks: what each rank's
//! buffer holds before and after. A buffer is four chunks; a chunk's colour says whose data it
//! is, stripes of every colour mean the sum over all ranks, a dashed outline means nothing.

use crate::blocks::picture::{Anchor, Picture};

const RANKS: usize = 4;
const CHUNK: (f64, f64) = (40.0, 14.0);
const CHUNK_PITCH: f64 = 44.0;
const RANK_PITCH: f64 = 18.0;
/// Where the buffers start, before and after.
const BEFORE: f64 = 210.0;
const AFTER: f64 = 456.0;
const ROW_PITCH: f64 = 100.0;
const TOP: f64 = 40.0;
/// Fill classes of each rank's data (their colours are in the style sheet).
const RANK_CLASSES: [&str; RANKS] = ["chunk rank-0", "chunk rank-1", "chunk rank-2", "chunk rank-3"];
const STRIPE_CLASSES: [&str; RANKS] = ["stripe rank-0", "stripe rank-1", "stripe rank-2", "stripe rank-3"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collective {
    Broadcast,
    AllReduce,
    AllGather,
    ReduceScatter,
}

/// What one chunk of a rank's buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Empty,
    /// That rank's own data.
    From(usize),
    /// The sum of that chunk over every rank.
    Sum,
}

impl Collective {
    const ALL: [Collective; 4] = [Collective::Broadcast, Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter];

    fn name(self) -> &'static str {
        match self {
            Collective::Broadcast => "broadcast",
            Collective::AllReduce => "all-reduce",
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter => "reduce-scatter",
        }
    }

    fn meaning(self) -> [&'static str; 2] {
        match self {
            Collective::Broadcast => ["rank 0's buffer is", "copied to every rank"],
            Collective::AllReduce => ["every rank ends with", "the sum of all buffers"],
            Collective::AllGather => ["every rank ends with", "every rank's chunk"],
            Collective::ReduceScatter => ["rank r ends with the", "sum of chunk r only"],
        }
    }

    fn before(self, rank: usize, chunk: usize) -> Chunk {
        match self {
            Collective::Broadcast if rank == 0 => Chunk::From(0),
            Collective::Broadcast => Chunk::Empty,
            Collective::AllReduce | Collective::ReduceScatter => Chunk::From(rank),
            Collective::AllGather if chunk == rank => Chunk::From(rank),
            Collective::AllGather => Chunk::Empty,
        }
    }

    fn after(self, rank: usize, chunk: usize) -> Chunk {
        match self {
            Collective::Broadcast => Chunk::From(0),
            Collective::AllReduce => Chunk::Sum,
            Collective::AllGather => Chunk::From(chunk),
            Collective::ReduceScatter if chunk == rank => Chunk::Sum,
            Collective::ReduceScatter => Chunk::Empty,
        }
    }
}

pub fn picture() -> Picture {
    let height = TOP + ROW_PITCH * Collective::ALL.len() as f64 + 30.0;
    let mut p = Picture::new(
        700.0,
        height,
        "Four collectives over four ranks, before and after: broadcast copies rank 0's buffer to all; all-reduce leaves the sum \
         everywhere; all-gather gives every rank every rank's chunk; reduce-scatter leaves rank r the sum of chunk r",
    );
    p.text(BEFORE, TOP - 16.0, "before", Anchor::Start, "heading");
    p.text(AFTER, TOP - 16.0, "after", Anchor::Start, "heading");
    for (i, collective) in Collective::ALL.into_iter().enumerate() {
        let top = TOP + i as f64 * ROW_PITCH;
        p.text(0.0, top + 14.0, collective.name(), Anchor::Start, "heading");
        p.lines(0.0, top + 32.0, collective.meaning(), Anchor::Start, "note");
        for rank in 0..RANKS {
            let y = top + rank as f64 * RANK_PITCH;
            p.text(BEFORE - 10.0, y + 11.0, format!("rank {rank}"), Anchor::End, "note");
            for chunk in 0..RANKS {
                let dx = chunk as f64 * CHUNK_PITCH;
                draw_chunk(&mut p, BEFORE + dx, y, collective.before(rank, chunk), rank, chunk);
                draw_chunk(&mut p, AFTER + dx, y, collective.after(rank, chunk), rank, chunk);
            }
        }
        let middle = top + RANK_PITCH * RANKS as f64 / 2.0 - 2.0;
        p.arrow((BEFORE + CHUNK_PITCH * RANKS as f64 + 8.0, middle), (AFTER - 14.0, middle), "flow");
    }
    p.text(
        0.0,
        height - 8.0,
        "colour: whose data · stripes of every colour: the sum over all ranks · dashed: nothing",
        Anchor::Start,
        "note",
    );
    p
}

fn draw_chunk(p: &mut Picture, x: f64, y: f64, chunk: Chunk, rank: usize, index: usize) {
    let (w, h) = CHUNK;
    let what = match chunk {
        Chunk::Empty => {
            p.rect(x, y, w, h, "chunk empty");
            "nothing".to_owned()
        }
        Chunk::From(owner) => {
            p.rect(x, y, w, h, RANK_CLASSES[owner]);
            format!("rank {owner}'s data")
        }
        Chunk::Sum => {
            let stripe = w / RANKS as f64;
            for (k, class) in STRIPE_CLASSES.into_iter().enumerate() {
                p.rect(x + k as f64 * stripe, y, stripe, h, class);
            }
            p.rect(x, y, w, h, "chunk sum");
            "the sum over all ranks".to_owned()
        }
    };
    p.titled(format!("rank {rank}, chunk {index}: {what}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(collective: Collective) -> Vec<Vec<Chunk>> {
        (0..RANKS).map(|r| (0..RANKS).map(|c| collective.after(r, c)).collect()).collect()
    }

    #[test]
    fn each_collective_leaves_what_it_promises() {
        assert!(after(Collective::Broadcast).iter().flatten().all(|c| *c == Chunk::From(0)));
        assert!(after(Collective::AllReduce).iter().flatten().all(|c| *c == Chunk::Sum));
        for buffer in after(Collective::AllGather) {
            assert_eq!(buffer, (0..RANKS).map(Chunk::From).collect::<Vec<_>>());
        }
        for (rank, buffer) in after(Collective::ReduceScatter).into_iter().enumerate() {
            let sums: Vec<usize> = buffer.iter().enumerate().filter(|(_, c)| **c == Chunk::Sum).map(|(i, _)| i).collect();
            assert_eq!(sums, [rank], "rank {rank} keeps the sum of its own chunk");
        }
        // All-gather starts where reduce-scatter ends: one chunk per rank.
        for rank in 0..RANKS {
            let held = (0..RANKS).filter(|&c| Collective::AllGather.before(rank, c) != Chunk::Empty).count();
            assert_eq!(held, 1);
        }
    }

    #[test]
    fn every_chunk_is_drawn_with_what_it_holds() {
        let p = picture();
        // Per collective, 16 chunks before and 16 after; a sum is four stripes under an outline.
        let sums = 16 + 4;
        assert_eq!(p.of_class("chunk sum").count(), sums);
        assert_eq!(p.items.iter().filter(|i| i.class.starts_with("stripe")).count(), 4 * sums);
        assert_eq!(p.of_class("chunk empty").count(), 12 + 12 + 12);
        assert!(p.items.iter().any(|i| i.tip.as_deref() == Some("rank 2, chunk 2: the sum over all ranks")));
        assert!(p.texts().contains(&"reduce-scatter"));
    }
}
