//! Pictures of grids: values coloured by a palette, panels side by side, PNG bytes.

use super::Palette;
use crate::Error;

/// An RGB picture, rows top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raster {
    pub width: usize,
    pub height: usize,
    /// `3 · width · height` bytes.
    pub rgb: Vec<u8>,
}

impl Raster {
    /// A `height` × `width` grid of values (row-major) coloured over `range` (low, high),
    /// every value drawn as a `scale` × `scale` block so small grids stay visible.
    pub fn from_values(values: &[f32], height: usize, width: usize, range: (f32, f32), palette: Palette, scale: usize) -> Raster {
        let scale = scale.max(1);
        let (lo, hi) = range;
        let span = f64::from(hi - lo);
        let t = |v: f32| if span > 0.0 { f64::from(v - lo) / span } else { 0.5 };
        let (w, h) = (width * scale, height * scale);
        let mut rgb = Vec::with_capacity(3 * w * h);
        for y in 0..h {
            let row = &values[(y / scale) * width..][..width];
            for x in 0..w {
                rgb.extend_from_slice(&palette.colour(t(row[x / scale])));
            }
        }
        Raster { width: w, height: h, rgb }
    }

    /// The panels left to right with a `gap` of white between them. Panels of different
    /// heights are top-aligned on white.
    pub fn side_by_side(panels: &[Raster], gap: usize) -> Raster {
        let height = panels.iter().map(|p| p.height).max().unwrap_or(0);
        let width = panels.iter().map(|p| p.width).sum::<usize>() + gap * panels.len().saturating_sub(1);
        let mut rgb = vec![255u8; 3 * width * height];
        let mut left = 0;
        for p in panels {
            for y in 0..p.height {
                let dst = 3 * (y * width + left);
                rgb[dst..dst + 3 * p.width].copy_from_slice(&p.rgb[3 * y * p.width..][..3 * p.width]);
            }
            left += p.width + gap;
        }
        Raster { width, height, rgb }
    }
}

/// The raster as a PNG file's bytes (8-bit RGB).
pub fn encode_png(raster: &Raster) -> Result<Vec<u8>, Error> {
    let fail = |e: png::EncodingError| Error::Image(e.to_string());
    let (w, h) = (u32::try_from(raster.width), u32::try_from(raster.height));
    let (Ok(w), Ok(h)) = (w, h) else {
        return Err(Error::Image(format!("{} × {} pixels is too large for a PNG", raster.width, raster.height)));
    };
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Smooth fields compress several times better with a filter chosen per row.
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header().map_err(fail)?;
    writer.write_image_data(&raster.rgb).map_err(fail)?;
    writer.finish().map_err(fail)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_scale_into_blocks_and_panels_sit_side_by_side() {
        let a = Raster::from_values(&[0.0, 1.0], 1, 2, (0.0, 1.0), Palette::Sequential, 2);
        assert_eq!((a.width, a.height), (4, 2));
        assert_eq!(&a.rgb[0..3], &Palette::Sequential.colour(0.0));
        assert_eq!(&a.rgb[9..12], &Palette::Sequential.colour(1.0));
        let both = Raster::side_by_side(&[a.clone(), a], 1);
        assert_eq!((both.width, both.height), (9, 2));
        assert_eq!(&both.rgb[12..15], &[255, 255, 255], "the gap is white");
    }

    #[test]
    fn png_bytes_carry_the_signature_and_size() {
        let r = Raster::from_values(&[0.0; 6], 2, 3, (0.0, 0.0), Palette::Diverging, 1);
        let png = encode_png(&r).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 3);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 2);
    }
}
