//! Deserializers that accept whatever a field holds. A Chrome trace is written by many tools
//! and each adds its own fields and value types (a `pid` that is a string, `args` that are an
//! array, a `ts` written as text); reading them strictly would refuse a whole file for one
//! odd event. These read what the timeline needs and let everything else go by.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A JSON value as the timeline uses it: a number, a text (borrowed from the file's bytes
/// when it has no escapes, so most events cost no copies), or something it cannot use.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Scalar<'a> {
    Number(f64),
    Text(Cow<'a, str>),
    #[default]
    Other,
}

impl Scalar<'_> {
    /// The value as text (a number printed as JSON would, `1234` not `1234.0`).
    pub fn text(&self) -> Option<String> {
        match self {
            Scalar::Number(n) => Some(n.to_string()),
            Scalar::Text(t) => Some(t.to_string()),
            Scalar::Other => None,
        }
    }

    /// The value, no longer borrowed.
    pub fn into_owned(self) -> Scalar<'static> {
        match self {
            Scalar::Number(n) => Scalar::Number(n),
            Scalar::Text(t) => Scalar::Text(Cow::Owned(t.into_owned())),
            Scalar::Other => Scalar::Other,
        }
    }

    /// The value as a finite number (a numeric text counts).
    pub fn number(&self) -> Option<f64> {
        let n = match self {
            Scalar::Number(n) => *n,
            Scalar::Text(t) => t.trim().parse().ok()?,
            Scalar::Other => return None,
        };
        n.is_finite().then_some(n)
    }
}

/// Writes the visitor methods that take every kind of JSON value, mapping scalars with
/// `$scalar` and skipping over arrays and objects, so a visitor never refuses a value.
macro_rules! accept_everything {
    ($scalar:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Other))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Number(v as f64)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Number(v as f64)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Number(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Text(Cow::Owned(v.to_owned()))))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Other))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($scalar(Scalar::Other))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($scalar(Scalar::Other))
        }
    };
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            accept_everything!(|s| s);
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Scalar<'de>, E> {
                Ok(Scalar::Text(Cow::Borrowed(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// The fields of an event's `args` the timeline reads: the names, labels and sort indexes
/// that metadata events give processes and threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args<'a> {
    pub name: Scalar<'a>,
    pub labels: Scalar<'a>,
    pub sort_index: Scalar<'a>,
}

impl<'de> Deserialize<'de> for Args<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgsVisitor;
        impl<'de> Visitor<'de> for ArgsVisitor {
            type Value = Args<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event's args")
            }
            accept_everything!(|_| Args::default());
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args<'de>, A::Error> {
                let mut args = Args::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Name => args.name = map.next_value()?,
                        Key::SortIndex => args.sort_index = map.next_value()?,
                        Key::Labels => args.labels = map.next_value()?,
                        _ => _ = map.next_value::<IgnoredAny>()?,
                    }
                }
                Ok(args)
            }
        }
        deserializer.deserialize_any(ArgsVisitor)
    }
}

/// One entry of a trace's event list as read: every field it may need, each possibly absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawEvent<'a> {
    pub ph: Scalar<'a>,
    pub name: Scalar<'a>,
    pub cat: Scalar<'a>,
    pub pid: Scalar<'a>,
    pub tid: Scalar<'a>,
    pub ts: Scalar<'a>,
    pub dur: Scalar<'a>,
    pub args: Args<'a>,
}

/// An entry of the event list: an event, or `None` for an entry that is not an object.
pub struct Entry<'a>(pub Option<RawEvent<'a>>);

impl<'de> Deserialize<'de> for Entry<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = Entry<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a trace event")
            }
            accept_everything!(|_| Entry(None));
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry<'de>, A::Error> {
                let mut event = RawEvent::default();
                // A repeated key overwrites, as JavaScript's JSON.parse does.
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Ph => event.ph = map.next_value()?,
                        Key::Name => event.name = map.next_value()?,
                        Key::Cat => event.cat = map.next_value()?,
                        Key::Pid => event.pid = map.next_value()?,
                        Key::Tid => event.tid = map.next_value()?,
                        Key::Ts => event.ts = map.next_value()?,
                        Key::Dur => event.dur = map.next_value()?,
                        Key::Args => event.args = map.next_value()?,
                        _ => _ = map.next_value::<IgnoredAny>()?,
                    }
                }
                Ok(Entry(Some(event)))
            }
        }
        deserializer.deserialize_any(EntryVisitor)
    }
}

/// The keys the reader looks for, in events, their args and the file's top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(field_identifier)]
pub enum Key {
    #[serde(rename = "ph")]
    Ph,
    #[serde(rename = "name")]
    Name,
    #[serde(rename = "cat")]
    Cat,
    #[serde(rename = "pid")]
    Pid,
    #[serde(rename = "tid")]
    Tid,
    #[serde(rename = "ts")]
    Ts,
    #[serde(rename = "dur")]
    Dur,
    #[serde(rename = "args")]
    Args,
    #[serde(rename = "sort_index")]
    SortIndex,
    #[serde(rename = "labels")]
    Labels,
    #[serde(rename = "traceEvents")]
    TraceEvents,
    #[serde(rename = "baseTimeNanoseconds")]
    BaseTime,
    #[serde(other)]
    Other,
}
