//! A published table as a horizontal bar chart: one bar per run at the value the source sums
//! it up with (or its last epoch), the other epochs as dots on it, so a slow first epoch or a
//! noisy run shows; benchy's three trials as a group of bars. Rows of another unit get a panel
//! with their own axis. Labels sit left of the bars, values at their ends.

use scalebook_shared::charts::{format_number, format_tick, linear_ticks};
use scalebook_shared::published::{Columns, Row, Table, number};

use super::picture::{Anchor, LINE, Picture, text_width};

pub const WIDTH: f64 = 700.0;
const TITLE: f64 = 22.0;
const BAR: f64 = 18.0;
const ROW_GAP: f64 = 10.0;
/// One bar of a group of measures.
const SUB_BAR: f64 = 12.0;
/// Room right of the plot for the value written at a bar's end.
const VALUE_ROOM: f64 = 96.0;
/// Ticks, their labels and the unit under each panel.
const AXIS: f64 = 40.0;
const TICKS: usize = 5;
const DOT: f64 = 3.0;
/// Bar classes for the measures of a group, in the table's order (colours in the style sheet).
const MEASURE_BARS: [&str; 3] = ["bar measure-0", "bar measure-1", "bar measure-2"];

pub fn bar_chart(table: &Table) -> Picture {
    let label_width = table.rows.iter().map(|r| text_width(r.label, 12.0)).fold(60.0, f64::max).min(300.0) + 12.0;
    let plot = Plot { left: label_width, width: WIDTH - VALUE_ROOM - label_width, top: 1.0 };
    let mut picture = Picture::new(WIDTH, 0.0, description(table));
    picture.text(0.0, 15.0, table.title, Anchor::Start, "heading");
    let mut y = TITLE + 6.0;
    if let Columns::Measures(names) = table.columns {
        y = legend(&mut picture, names, plot.left, y);
    }
    for rows in panels(table) {
        let plot = plot.fitted(rows, table.columns);
        let pitch = row_height(table.columns) + ROW_GAP;
        let axis_y = y + rows.len() as f64 * pitch - ROW_GAP / 2.0;
        axis(&mut picture, &plot, (y - 4.0, axis_y), rows[0].unit(table));
        for (i, row) in rows.iter().enumerate() {
            draw_row(&mut picture, &plot, table, row, y + i as f64 * pitch);
        }
        y = axis_y + AXIS + 8.0;
    }
    picture.height = y;
    picture
}

/// Where values fall along a panel's x axis.
#[derive(Debug, Clone, Copy)]
struct Plot {
    left: f64,
    width: f64,
    /// The value at the right end: the largest one drawn, rounded up to a tick.
    top: f64,
}

impl Plot {
    fn fitted(self, rows: &[Row], columns: Columns) -> Plot {
        let largest = rows.iter().flat_map(|r| drawn_values(r, columns)).fold(0.0, f64::max);
        let (_, step) = linear_ticks(0.0, largest, TICKS);
        let top = if step > 0.0 { (largest / step).ceil() * step } else { 1.0 };
        Plot { top, ..self }
    }

    fn x(&self, value: f64) -> f64 {
        self.left + value.max(0.0) / self.top * self.width
    }
}

/// Runs of rows that share a unit, in order.
fn panels(table: &Table) -> Vec<&[Row]> {
    let mut panels = Vec::new();
    let mut start = 0;
    for i in 1..=table.rows.len() {
        if i == table.rows.len() || table.rows[i].unit(table) != table.rows[start].unit(table) {
            panels.push(&table.rows[start..i]);
            start = i;
        }
    }
    panels
}

/// The value a run's bar stands at: the source's summary, or else its last value.
fn bar_value(row: &Row) -> f64 {
    row.summary().or_else(|| row.values.last().and_then(|v| number(v))).unwrap_or(0.0)
}

/// Every value a row puts on the axis.
fn drawn_values(row: &Row, columns: Columns) -> Vec<f64> {
    let mut values: Vec<f64> = row.numbers().into_iter().flatten().collect();
    if !matches!(columns, Columns::Measures(_)) {
        values.push(bar_value(row));
    }
    values
}

/// A printed value short enough to write at a bar's end: four significant digits of a plain
/// number, anything else (`1h32m`, `78%`) as printed.
fn short(printed: &str) -> String {
    match printed.parse::<f64>() {
        Ok(n) => format_number(n),
        Err(_) => printed.to_owned(),
    }
}

/// What a row's bars say: the source's summary, or its last value; each measure of a group.
fn written(row: &Row, columns: Columns) -> String {
    match columns {
        Columns::Measures(names) => names.iter().zip(row.values).map(|(n, v)| format!("{n} {v}")).collect::<Vec<_>>().join(", "),
        Columns::Epochs { .. } | Columns::Single => row.said.map_or_else(|| short(row.values[row.values.len() - 1]), str::to_owned),
    }
}

/// The height of one row's bars.
fn row_height(columns: Columns) -> f64 {
    match columns {
        Columns::Measures(names) => names.len() as f64 * SUB_BAR,
        Columns::Epochs { .. } | Columns::Single => BAR,
    }
}

/// A panel's grid lines and ticks from `top` to the axis at `bottom`, under its bars, and
/// its unit.
fn axis(picture: &mut Picture, plot: &Plot, (top, bottom): (f64, f64), unit: &str) {
    let (ticks, step) = linear_ticks(0.0, plot.top, TICKS);
    for tick in ticks {
        let x = plot.x(tick);
        picture.line((x, top), (x, bottom), "grid");
        picture.text(x, bottom + 14.0, format_tick(tick, step), Anchor::Middle, "tick");
    }
    picture.line((plot.left, top), (plot.left, bottom), "axis");
    picture.text(plot.left + plot.width / 2.0, bottom + 30.0, unit, Anchor::Middle, "unit");
}

/// Draws one row with its bars' top at `y`.
fn draw_row(picture: &mut Picture, plot: &Plot, table: &Table, row: &Row, y: f64) {
    let unit = row.unit(table);
    if let Columns::Measures(names) = table.columns {
        let height = row_height(table.columns);
        picture.text(plot.left - 8.0, y + height / 2.0 + 4.0, row.label, Anchor::End, "label");
        for (i, (name, printed)) in names.iter().zip(row.values).enumerate() {
            let top = y + i as f64 * SUB_BAR;
            let end = plot.x(number(printed).unwrap_or(0.0));
            picture.rect(plot.left, top, end - plot.left, SUB_BAR - 1.0, MEASURE_BARS[i % MEASURE_BARS.len()]);
            picture.titled(format!("{}, {name}: {printed} {unit}", row.label));
            picture.text(end + 5.0, top + SUB_BAR - 2.5, short(printed), Anchor::Start, "value small");
        }
        return;
    }
    let centre = y + BAR / 2.0;
    picture.text(plot.left - 8.0, centre + 4.0, row.label, Anchor::End, "label");
    let end = plot.x(bar_value(row));
    picture.rect(plot.left, y, end - plot.left, BAR, "bar");
    picture.titled(format!("{}: {} {unit} (row {})", row.label, row.values.join(", "), row.checklist));
    let last = row.values.len() - 1;
    for (i, printed) in row.values.iter().enumerate().filter(|(i, _)| row.said.is_some() || *i != last) {
        let (Columns::Epochs { first }, Some(value)) = (table.columns, number(printed)) else { continue };
        picture.circle(plot.x(value), centre, DOT, "dot");
        picture.titled(format!("epoch {}: {printed} {unit}", first as usize + i));
    }
    // Written past the bar and past any epoch beyond it.
    let far = row.numbers().into_iter().flatten().map(|v| plot.x(v) + DOT).fold(end, f64::max);
    picture.text(far + 6.0, centre + 4.0, written(row, table.columns), Anchor::Start, "value");
}

/// Swatches naming the measures of grouped bars; returns where the rows may start.
fn legend(picture: &mut Picture, names: &[&str], left: f64, y: f64) -> f64 {
    let mut x = left;
    for (i, name) in names.iter().enumerate() {
        picture.rect(x, y, 12.0, 12.0, MEASURE_BARS[i % MEASURE_BARS.len()]);
        picture.text(x + 17.0, y + 10.5, *name, Anchor::Start, "measure-name");
        x += 30.0 + text_width(name, 12.0);
    }
    y + LINE + 10.0
}

/// The chart in words, for screen readers: each run with the value written at its bar.
fn description(table: &Table) -> String {
    let panels: Vec<String> = panels(table)
        .into_iter()
        .map(|rows| {
            let runs: Vec<String> = rows.iter().map(|row| format!("{}: {}", row.label, written(row, table.columns))).collect();
            format!("In {}: {}", rows[0].unit(table), runs.join("; "))
        })
        .collect();
    format!("{}. {}.", table.title, panels.join(". "))
}

#[cfg(test)]
mod tests {
    use scalebook_shared::published::{NAMES, table};

    use super::*;
    use crate::blocks::picture::{Item, Shape};

    fn rect(item: &Item) -> (f64, f64, f64, f64) {
        match item.shape {
            Shape::Rect { x, y, w, h } => (x, y, w, h),
            _ => panic!("{item:?}"),
        }
    }

    #[test]
    fn every_run_gets_a_bar_inside_the_plot() {
        for name in NAMES {
            let table = table(name).unwrap();
            let chart = bar_chart(table);
            let bars: Vec<&Item> = chart.items.iter().filter(|i| i.class.starts_with("bar")).collect();
            let per_row = match table.columns {
                Columns::Measures(names) => names.len(),
                _ => 1,
            };
            // The legend's swatches share the measures' classes.
            let legend = if per_row > 1 { per_row } else { 0 };
            assert_eq!(bars.len(), table.rows.len() * per_row + legend, "{name}");
            for bar in bars {
                let (x, y, w, h) = rect(bar);
                assert!(w >= 0.0 && x + w <= WIDTH - VALUE_ROOM + 1e-9, "{name}: {bar:?}");
                assert!(y + h <= chart.height, "{name}: {bar:?}");
            }
        }
    }

    #[test]
    fn a_bar_stands_at_the_sources_summary_with_every_epoch_as_a_dot() {
        let ladder = table("dl4sci25-ladder").unwrap();
        let chart = bar_chart(ladder);
        let bars: Vec<_> = chart.of_class("bar").map(rect).collect();
        let texts = chart.texts();
        assert!(texts.contains(&"about 8.8") && texts.contains(&"over 37"), "{texts:?}");
        // The summary 8.8 and the fp16 run's 37: bar lengths in proportion.
        assert!((bars[0].2 / bars[3].2 - 8.8 / 37.0).abs() < 1e-9);
        // Four epochs as dots where the source sums up the run; three (the bar is the
        // fourth) where it does not (TF32 off).
        let dots = chart.of_class("dot").count();
        assert_eq!(dots, 4 + 4 + 3 + 4 + 4);
        assert!(chart.of_class("dot").any(|d| d.tip.as_deref() == Some("epoch 1: 8.362020 samples/s")));
    }

    #[test]
    fn benchy_draws_a_group_of_three_bars_per_configuration() {
        let benchy = table("sc22-benchy").unwrap();
        let chart = bar_chart(benchy);
        let io: Vec<_> = chart.of_class("bar measure-0").map(rect).collect();
        let full: Vec<_> = chart.of_class("bar measure-2").map(rect).collect();
        assert_eq!((io.len(), full.len()), (6, 6), "five configurations and the legend's swatch");
        // Baseline: FULL is bounded by IO (89.971 against 89.177).
        assert!((full[1].2 / io[1].2 - 89.971 / 89.177).abs() < 1e-9);
        assert!(chart.texts().contains(&"SYNTHETIC"));
        assert_eq!(chart.of_class("dot").count(), 0);
    }

    #[test]
    fn rows_of_another_unit_get_their_own_panel() {
        let chart = bar_chart(table("mp-memory").unwrap());
        let units: Vec<&str> = chart.of_class("unit").map(texts_of).collect();
        assert_eq!(units, ["GB after the forward pass", "samples/s"]);
        let jsc = bar_chart(table("jsc-runtimes").unwrap());
        assert!(jsc.texts().contains(&"1h32m"), "durations are written as printed");
        let bars: Vec<_> = jsc.of_class("bar").map(rect).collect();
        assert!((bars[0].2 / bars[2].2 - 92.0 / 14.0).abs() < 1e-9);
    }

    fn texts_of(item: &Item) -> &str {
        match &item.shape {
            Shape::Text { text, .. } => text,
            _ => panic!("{item:?}"),
        }
    }

    #[test]
    fn values_are_shortened_only_when_they_are_plain_numbers() {
        assert_eq!(short("1315.088933035222"), "1315");
        assert_eq!(short("8.362020"), "8.362");
        assert_eq!(short("1h32m"), "1h32m");
        assert_eq!(short("78%"), "78%");
    }

    #[test]
    fn the_description_reads_the_chart_out() {
        let text = description(table("sc22-weak-scaling").unwrap());
        assert!(text.contains("In %: efficiency, local batch 64: around 78%; "), "{text}");
        let text = description(table("sc22-benchy").unwrap());
        assert!(text.contains("baseline: IO 89.177, SYNTHETIC 376.537, FULL 89.971"), "{text}");
    }
}
