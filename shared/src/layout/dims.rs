//! The four parallel dimensions, and the per-dimension numbers a layout is made of (sizes) and
//! a rank is placed by (coordinates).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// One axis of the rank grid.
///
/// The variants are declared in the tutorial's order for appending names missing from an order
/// string (tp, pp, dp, cp). The same order spells combined tokens canonically, which gives
/// exactly the names the tutorial and Megatron-LM use (`tp-cp`, `dp-cp`, `tp-pp`, `tp-dp-cp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dim {
    /// Tensor parallelism: weight matrices split across ranks.
    Tp,
    /// Pipeline parallelism: layers split across ranks (built, never trained with).
    Pp,
    /// Data parallelism: replicas that see different samples.
    Dp,
    /// Context parallelism: the token sequence split across ranks.
    Cp,
}

impl Dim {
    /// Every dimension, in the declaration order documented on [`Dim`].
    pub const ALL: [Dim; 4] = [Dim::Tp, Dim::Pp, Dim::Dp, Dim::Cp];

    pub const fn name(self) -> &'static str {
        match self {
            Dim::Tp => "tp",
            Dim::Pp => "pp",
            Dim::Dp => "dp",
            Dim::Cp => "cp",
        }
    }

    /// Position in [`Dim::ALL`], for per-dimension arrays.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Case-insensitive, because the tutorial lower-cases its order strings.
impl FromStr for Dim {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        Dim::ALL.into_iter().find(|d| d.name() == lower).ok_or_else(|| Error::Parse {
            what: "dimension name".into(),
            message: format!("unknown name `{s}`; the names are tp, cp, dp and pp"),
        })
    }
}

/// Sizes and coordinates are both "one number per dimension"; this gives both the same lookup.
macro_rules! per_dim_lookup {
    ($ty:ty) => {
        impl $ty {
            pub const fn get(&self, dim: Dim) -> u32 {
                match dim {
                    Dim::Tp => self.tp,
                    Dim::Pp => self.pp,
                    Dim::Dp => self.dp,
                    Dim::Cp => self.cp,
                }
            }
        }
    };
}

/// How many ranks each dimension spans. A missing field means 1, so `{"tp": 4, "dp": 2}` is a
/// complete layout, as it is on the tutorial's command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sizes {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
}

impl Default for Sizes {
    fn default() -> Self {
        Self { tp: 1, cp: 1, dp: 1, pp: 1 }
    }
}

per_dim_lookup!(Sizes);

/// Where one rank sits on each axis; `coords.tp` is its rank inside its tp group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Coords {
    pub tp: u32,
    pub cp: u32,
    pub dp: u32,
    pub pp: u32,
}

per_dim_lookup!(Coords);

impl Coords {
    pub(crate) fn from_fn(mut coord: impl FnMut(Dim) -> u32) -> Self {
        Self { tp: coord(Dim::Tp), cp: coord(Dim::Cp), dp: coord(Dim::Dp), pp: coord(Dim::Pp) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ignore_case() {
        for dim in Dim::ALL {
            assert_eq!(dim.to_string().parse::<Dim>().unwrap(), dim);
        }
        assert_eq!("CP".parse::<Dim>().unwrap(), Dim::Cp);
        let err = "ep".parse::<Dim>().unwrap_err().to_string();
        assert!(err.contains("`ep`"), "{err}");
    }

    #[test]
    fn lookup_reads_the_named_field() {
        let sizes = Sizes { tp: 2, cp: 3, dp: 5, pp: 7 };
        let got: Vec<u32> = Dim::ALL.iter().map(|&d| sizes.get(d)).collect();
        assert_eq!(got, [2, 7, 5, 3]);
        let coords = Coords::from_fn(|d| match d {
            Dim::Tp => 10,
            Dim::Pp => 11,
            Dim::Dp => 12,
            Dim::Cp => 13,
        });
        assert_eq!(coords, Coords { tp: 10, cp: 13, dp: 12, pp: 11 });
        assert_eq!(coords.get(Dim::Cp), 13);
    }

    #[test]
    fn sizes_default_to_one_and_reject_unknown_fields() {
        let sizes: Sizes = serde_json::from_str(r#"{"tp": 4, "dp": 2}"#).unwrap();
        assert_eq!(sizes, Sizes { tp: 4, cp: 1, dp: 2, pp: 1 });
        assert!(serde_json::from_str::<Sizes>(r#"{"ep": 2}"#).is_err());
        assert_eq!(serde_json::to_string(&Dim::Cp).unwrap(), r#""cp""#);
    }
}
