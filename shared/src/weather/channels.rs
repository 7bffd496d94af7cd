//! The channels of the tutorial's ERA5 extract, in file order (FourCastNet's convention).

/// One channel of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// The short name the tutorial and FourCastNet use (`t2m`).
    pub name: &'static str,
    /// What it is, in words.
    pub title: &'static str,
    /// The units of the stored (not normalised) values.
    pub units: &'static str,
}

const fn ch(name: &'static str, title: &'static str, units: &'static str) -> Channel {
    Channel { name, title, units }
}

/// The 20 channels in file order. The tutorial names two of them: channel 0 (u10, its RMSE
/// metric) and 2 (t2m, its plots).
pub const CHANNELS: [Channel; 20] = [
    ch("u10", "eastward wind at 10 m", "m/s"),
    ch("v10", "northward wind at 10 m", "m/s"),
    ch("t2m", "temperature at 2 m", "K"),
    ch("sp", "surface pressure", "Pa"),
    ch("msl", "mean sea-level pressure", "Pa"),
    ch("t850", "temperature at 850 hPa", "K"),
    ch("u1000", "eastward wind at 1000 hPa", "m/s"),
    ch("v1000", "northward wind at 1000 hPa", "m/s"),
    ch("z1000", "geopotential at 1000 hPa", "m²/s²"),
    ch("u850", "eastward wind at 850 hPa", "m/s"),
    ch("v850", "northward wind at 850 hPa", "m/s"),
    ch("z850", "geopotential at 850 hPa", "m²/s²"),
    ch("u500", "eastward wind at 500 hPa", "m/s"),
    ch("v500", "northward wind at 500 hPa", "m/s"),
    ch("z500", "geopotential at 500 hPa", "m²/s²"),
    ch("t500", "temperature at 500 hPa", "K"),
    ch("z50", "geopotential at 50 hPa", "m²/s²"),
    ch("r500", "relative humidity at 500 hPa", "%"),
    ch("r850", "relative humidity at 850 hPa", "%"),
    ch("tcwv", "total column water vapour", "kg/m²"),
];

/// The index of the channel called `name`.
pub fn channel_index(name: &str) -> Option<usize> {
    CHANNELS.iter().position(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tutorials_two_named_channels_sit_where_its_code_reads_them() {
        assert_eq!(channel_index("u10"), Some(0));
        assert_eq!(channel_index("t2m"), Some(2));
        assert_eq!(channel_index("tcwv"), Some(19));
        assert_eq!(channel_index("nope"), None);
    }
}
