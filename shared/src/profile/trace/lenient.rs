//! Deserializers that accept whatever a field holds. A Chrome trace is written by many tools
//! and each adds its own fields and value types (a `pid` that is a string, `args` that are an
//! array, a `ts` written as text); reading them strictly would refuse a whole file for one
//! odd event. These read what the timeline needs and let everything else go by.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de::Error as _};

/// A JSON value as the timeline uses it: a number, a text, or something it cannot use.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Scalar {
    Number(f64),
    Text(String),
    #[default]
    Other,
}

impl Scalar {
    /// The value as text (a number printed as JSON would, `1234` not `1234.0`).
    pub fn text(&self) -> Option<String> {
        match self {
            Scalar::Number(n) => Some(n.to_string()),
            Scalar::Text(t) => Some(t.clone()),
            Scalar::Other => None,
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
            Ok($scalar(Scalar::Text(v.to_owned())))
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

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            accept_everything!(|s| s);
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
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
pub struct Args {
    pub name: Scalar,
    pub labels: Scalar,
    pub sort_index: Scalar,
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgsVisitor;
        impl<'de> Visitor<'de> for ArgsVisitor {
            type Value = Args;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event's args")
            }
            accept_everything!(|_| Args::default());
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Args, A::Error> {
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
pub struct RawEvent {
    pub ph: Scalar,
    pub name: Scalar,
    pub cat: Scalar,
    pub pid: Scalar,
    pub tid: Scalar,
    pub ts: Scalar,
    pub dur: Scalar,
    pub args: Args,
}

/// An entry of the event list: an event, or `None` for an entry that is not an object.
pub struct Entry(pub Option<RawEvent>);

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = Entry;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a trace event")
            }
            accept_everything!(|_| Entry(None));
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
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

/// A whole file read as a stream: each event (for the object form, each of `traceEvents`) is
/// handed to the sink as soon as it is read, and nothing of it is kept here, so a trace of
/// hundreds of MB costs one event's memory. The value is the base time Kineto counts its
/// timestamps from.
pub struct EventStream<'s, F>(pub &'s mut F);

impl<'de, F: FnMut(RawEvent)> DeserializeSeed<'de> for EventStream<'_, F> {
    type Value = Scalar;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Scalar, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, F: FnMut(RawEvent)> Visitor<'de> for EventStream<'_, F> {
    type Value = Scalar;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Chrome trace: an object with `traceEvents`, or a list of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
        entries(seq, self.0)?;
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        let mut base_ns = Scalar::Other;
        let mut found = false;
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::TraceEvents => {
                    map.next_value_seed(EventList(&mut *self.0))?;
                    found = true;
                }
                Key::BaseTime => base_ns = map.next_value()?,
                _ => _ = map.next_value::<IgnoredAny>()?,
            }
        }
        if !found {
            return Err(A::Error::custom("the object has no `traceEvents` list"));
        }
        Ok(base_ns)
    }
}

/// The event list of the object form, streamed to the sink.
struct EventList<'s, F>(&'s mut F);

impl<'de, F: FnMut(RawEvent)> DeserializeSeed<'de> for EventList<'_, F> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(RawEvent)> Visitor<'de> for EventList<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("`traceEvents` as a list of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        entries(seq, self.0)
    }
}

/// Hands the entries that are objects to the sink.
fn entries<'de, A: SeqAccess<'de>>(mut seq: A, sink: &mut impl FnMut(RawEvent)) -> Result<(), A::Error> {
    while let Some(Entry(entry)) = seq.next_element()? {
        if let Some(event) = entry {
            sink(event);
        }
    }
    Ok(())
}
