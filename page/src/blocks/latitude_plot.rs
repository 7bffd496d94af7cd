//! Where the latitude weights of a grid's rows are drawn in the small plot beside a map: row
//! for row with the map's pixels, so the plot and the map line up. Kept apart from the page's
//! component so the geometry is tested natively.

/// The plot's size in its own units; the page gives it the map's height, so rows line up.
pub const HEIGHT: f64 = 240.0;
pub const WIDTH: f64 = 120.0;
/// Room for the latitude labels on the left.
pub const LEFT: f64 = 36.0;
pub const RIGHT: f64 = 6.0;

/// The vertical position of the middle of row `j` of `rows`: rows fill the height evenly, as
/// the map's pixels do.
pub fn row_y(j: f64, rows: usize) -> f64 {
    (j + 0.5) * HEIGHT / rows.max(1) as f64
}

/// Where latitude `lat` lies in a grid of `rows` rows from +90 to −90 (the rows of
/// `scalebook_shared::weather::latitude`).
pub fn latitude_y(lat: f64, rows: usize) -> f64 {
    let j = if rows > 1 { (90.0 - lat) * (rows - 1) as f64 / 180.0 } else { 0.0 };
    row_y(j, rows)
}

/// The outline of the weights: from the zero line down every row's weight and back.
pub fn area_points(weights: &[f32], x: impl Fn(f64) -> f64) -> String {
    let rows = weights.len();
    let mut points = vec![format!("{:.1},{:.1}", x(0.0), row_y(0.0, rows))];
    points.extend(weights.iter().enumerate().map(|(j, w)| format!("{:.1},{:.1}", x(f64::from(*w).max(0.0)), row_y(j as f64, rows))));
    points.push(format!("{:.1},{:.1}", x(0.0), row_y(rows.saturating_sub(1) as f64, rows)));
    points.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_fill_the_height_and_latitudes_fall_on_their_rows() {
        assert_eq!(row_y(0.0, 4), 30.0);
        assert_eq!(row_y(3.0, 4), 210.0);
        // 5 rows: 90, 45, 0, −45, −90.
        assert_eq!(latitude_y(90.0, 5), row_y(0.0, 5));
        assert_eq!(latitude_y(0.0, 5), row_y(2.0, 5));
        assert_eq!(latitude_y(-90.0, 5), row_y(4.0, 5));
        let points = area_points(&[0.0, 2.0], |w| w * 10.0);
        assert_eq!(points, "0.0,60.0 0.0,60.0 20.0,180.0 0.0,180.0");
    }
}
