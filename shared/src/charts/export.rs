//! A chart's series as CSV, for a spreadsheet or a plotting script: one row per bucket, with
//! both time columns and the bucket's spread, so nothing the chart showed is lost.

use std::fmt::Write as _;

use crate::metrics::Bucket;

/// One series to export.
#[derive(Debug, Clone, Copy)]
pub struct CsvSeries<'a> {
    /// The run's name (its id, or `baseline`).
    pub run: &'a str,
    pub tag: &'a str,
    pub buckets: &'a [Bucket],
    /// The wall time of the run's first point, for the relative-time column.
    pub start_wall: f64,
}

pub const CSV_HEADER: &str = "run,tag,step,wall_time,relative_time,value,min,max,count";

pub fn to_csv(series: &[CsvSeries<'_>]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for s in series {
        for b in s.buckets {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{}",
                field(s.run),
                field(s.tag),
                b.last_step,
                b.last_wall,
                b.last_wall - s.start_wall,
                b.last,
                b.min,
                b.max,
                b.count
            );
        }
    }
    out
}

/// Quotes a text field when it holds a separator, a quote or a line break (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_bucket_with_both_time_columns() {
        let buckets = [
            Bucket {
                first_step: 0,
                last_step: 0,
                first_wall: 100.0,
                last_wall: 100.0,
                epoch: 0,
                min: 1.5,
                max: 1.5,
                last: 1.5,
                count: 1,
                non_finite: 0,
            },
            Bucket {
                first_step: 1,
                last_step: 4,
                first_wall: 101.0,
                last_wall: 104.5,
                epoch: 1,
                min: 0.5,
                max: 2.0,
                last: 0.75,
                count: 4,
                non_finite: 0,
            },
        ];
        let csv = to_csv(&[CsvSeries { run: "r1", tag: "Loss/train", buckets: &buckets, start_wall: 100.0 }]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines, [CSV_HEADER, "r1,Loss/train,0,100,0,1.5,1.5,1.5,1", "r1,Loss/train,4,104.5,4.5,0.75,0.5,2,4"]);
    }

    #[test]
    fn odd_names_are_quoted() {
        assert_eq!(field("RMSE(u10m)/valid"), "RMSE(u10m)/valid");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
