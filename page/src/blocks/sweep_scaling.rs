//! The scaling board, the sweep's `scaling` measure: each variant's throughput per rank against
//! the ideal (the first variant's per rank, held at every size) and its efficiency in percent,
//! on an axis of ranks, filled in as the runs finish; the sources' own published scaling
//! drawn beside them as reference points of their edition, never mixed into this machine's.

use scalebook_shared::charts::format_number;
use scalebook_shared::published;

use super::sweep_model::{CURVES_HEIGHT, CURVES_MARGIN, WIDTH};

/// The published efficiencies the board draws, with the GPUs they were measured on: SC22's
/// weak scaling at 32 nodes of 4 GPUs.
const REFERENCES: [(&str, u32); 1] = [("sc22-weak-scaling", 128)];

/// One variant on the board, once its run has a throughput.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub ranks: u32,
    pub samples_per_s: f64,
    pub per_rank: f64,
    /// What a rank would do if nothing were lost: the first variant's per rank.
    pub ideal_per_rank: f64,
    pub efficiency: f64,
}

/// The rows of the variants, each with its ranks and its run's samples/s (`None` until it has
/// one). The first variant is the base; without its throughput no efficiency is known yet.
pub fn rows(values: &[(u32, Option<f64>)]) -> Vec<Option<Row>> {
    let base = values.first().and_then(|&(ranks, v)| Some(v? / f64::from(ranks.max(1))));
    values
        .iter()
        .map(|&(ranks, value)| {
            let (samples_per_s, ideal_per_rank) = (value?, base?);
            let per_rank = samples_per_s / f64::from(ranks.max(1));
            Some(Row { ranks, samples_per_s, per_rank, ideal_per_rank, efficiency: per_rank / ideal_per_rank })
        })
        .collect()
}

/// A point of the board: where it is drawn and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

/// The board drawn in the sweep's curve box: ranks on a log-2 axis (up to the references'
/// GPUs), efficiency from 0 up, the ideal at 100 %.
#[derive(Debug, Clone, PartialEq)]
pub struct Board {
    pub here: Vec<Option<Mark>>,
    /// Each variant's efficiency as predicted at launch, where its run has a prediction.
    pub predicted: Vec<Option<Mark>>,
    pub references: Vec<Mark>,
    pub ideal_y: f64,
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
}

/// The board of `rows` as measured and `predicted` (the same rows from the throughputs
/// predicted at launch).
pub fn board(rows: &[Option<Row>], predicted: &[Option<Row>]) -> Board {
    let references: Vec<(u32, f64, String)> = REFERENCES
        .iter()
        .filter_map(|&(name, gpus)| Some((published::table(name)?, gpus)))
        .flat_map(|(table, gpus)| {
            table.rows.iter().filter(|r| r.label.starts_with("efficiency")).filter_map(move |r| {
                let percent = r.numbers().first().copied().flatten()?;
                Some((
                    gpus,
                    percent / 100.0,
                    format!("{} ({}): {}", table.title.split(',').next().unwrap_or(table.title), r.label, r.values[0]),
                ))
            })
        })
        .collect();
    let max_ranks = rows.iter().flatten().map(|r| r.ranks).chain(references.iter().map(|r| r.0)).max().unwrap_or(1).max(2);
    let max_efficiency = rows.iter().chain(predicted).flatten().map(|r| r.efficiency).fold(1.2f64, f64::max);
    let m = CURVES_MARGIN;
    let octaves = f64::from(max_ranks).log2().ceil();
    let x_at = |ranks: u32| m + f64::from(ranks.max(1)).log2() / octaves * (WIDTH - 1.5 * m);
    let y_at = |e: f64| CURVES_HEIGHT - m / 2.0 - e / max_efficiency * (CURVES_HEIGHT - m);
    let marks = |rows: &[Option<Row>]| -> Vec<Option<Mark>> {
        rows.iter()
            .map(|r| {
                let r = r.as_ref()?;
                Some(Mark { x: x_at(r.ranks), y: y_at(r.efficiency), label: format!("{:.0} %", r.efficiency * 100.0) })
            })
            .collect()
    };
    let (here, predicted) = (marks(rows), marks(predicted));
    let references = references.into_iter().map(|(gpus, e, label)| Mark { x: x_at(gpus), y: y_at(e), label }).collect();
    let x_ticks = (0..=octaves as u32).map(|k| (x_at(1 << k), format!("{}", 1u32 << k))).collect();
    let y_ticks = (0..=(max_efficiency * 4.0).floor() as u32)
        .map(|q| f64::from(q) * 0.25)
        .map(|e| (y_at(e), format!("{} %", format_number(e * 100.0))))
        .collect();
    Board { here, predicted, references, ideal_y: y_at(1.0), x_ticks, y_ticks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efficiency_is_throughput_per_rank_against_the_first_variants() {
        let rows = rows(&[(1, Some(40.0)), (2, Some(60.0)), (4, None)]);
        let two = rows[1].as_ref().unwrap();
        assert_eq!((two.per_rank, two.ideal_per_rank, two.efficiency), (30.0, 40.0, 0.75));
        assert_eq!(rows[0].as_ref().unwrap().efficiency, 1.0);
        assert!(rows[2].is_none(), "not run yet");
        assert!(super::rows(&[(1, None), (2, Some(60.0))]).iter().all(Option::is_none), "no base, no efficiency");
    }

    #[test]
    fn the_board_puts_this_machine_beside_the_sources_at_their_own_sizes() {
        let b = board(&rows(&[(1, Some(40.0)), (2, Some(60.0))]), &rows(&[(1, Some(40.0)), (2, Some(72.0))]));
        let (one, two) = (b.here[0].as_ref().unwrap(), b.here[1].as_ref().unwrap());
        assert_eq!(one.y, b.ideal_y, "the base is the ideal");
        assert!(two.y > b.ideal_y && two.x > one.x, "75 % is drawn below the ideal, further right");
        assert_eq!(two.label, "75 %");
        let predicted = b.predicted[1].as_ref().unwrap();
        assert!(predicted.y < two.y && predicted.x == two.x, "90 % predicted, above the 75 % measured");
        assert_eq!(b.references.len(), 2, "SC22's two weak-scaling efficiencies");
        assert!(b.references.iter().all(|r| r.x > two.x), "at 128 GPUs");
        assert!(b.references[0].label.contains("78%") && b.references[0].label.starts_with("SC22"), "{}", b.references[0].label);
        assert_eq!(b.x_ticks.last().map(|t| t.1.as_str()), Some("128"));
        assert!(b.y_ticks.iter().any(|t| t.1 == "100 %"));
    }
}
