//! Floats that may be NaN or infinite, in JSON, which has no such numbers: written as the
//! strings `"NaN"`, `"Infinity"` and `"-Infinity"` (JavaScript's names), read back from those,
//! from any number, or from `null` (what files written before this held for a NaN). A loss
//! that diverged is a point like any other: it is kept and drawn, never dropped or turned into
//! a line nothing can parse.

use serde::{Deserializer, Serializer, de};

pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    match *value {
        v if v.is_finite() => serializer.serialize_f64(v),
        v if v.is_nan() => serializer.serialize_str("NaN"),
        v if v > 0.0 => serializer.serialize_str("Infinity"),
        _ => serializer.serialize_str("-Infinity"),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    deserializer.deserialize_any(Float)
}

struct Float;

impl de::Visitor<'_> for Float {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a number, or \"NaN\", \"Infinity\" or \"-Infinity\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        match v {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::MetricPoint;

    #[test]
    fn non_finite_values_survive_a_trip_through_json_and_old_nulls_read_as_nan() {
        for value in [1.5, -0.0, 3e300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let point = MetricPoint { step: 3, epoch: 1, wall: 10.0, tag: "Loss/train".into(), value };
            let line = serde_json::to_string(&point).unwrap();
            let back: MetricPoint = serde_json::from_str(&line).unwrap();
            assert!(back.value == value || (value.is_nan() && back.value.is_nan()), "{line}");
        }
        let nan = serde_json::to_string(&MetricPoint { step: 0, epoch: 0, wall: 1.0, tag: "t".into(), value: f64::NAN }).unwrap();
        assert!(nan.contains(r#""value":"NaN""#), "{nan}");
        let old: MetricPoint = serde_json::from_str(r#"{"step":1,"epoch":1,"wall":2.0,"tag":"t","value":null}"#).unwrap();
        assert!(old.value.is_nan());
        let wrong = serde_json::from_str::<MetricPoint>(r#"{"step":1,"epoch":1,"wall":2.0,"tag":"t","value":"lots"}"#).unwrap_err();
        assert!(wrong.to_string().contains("\"NaN\""), "{wrong}");
    }
}
