//! A value fetched again whenever what it depends on changes, read without suspending: a
//! `LocalResource` read under a `Suspense` (every block is under one while the library loads)
//! puts the whole block back to its fallback each time it fetches again, so a choice in a
//! select flashed "Loading" over the block; this keeps the last value until the next arrives.

use std::future::Future;

use leptos::prelude::*;
use leptos::task::spawn_local;

/// The latest result of `fetch(inputs())`, `None` until the first arrives. `inputs` is tracked:
/// each change starts a fetch, and an answer that comes after a newer fetch started is dropped.
pub fn fetched<I, T, F>(inputs: impl Fn() -> I + 'static, fetch: impl Fn(I) -> F + 'static) -> ReadSignal<Option<T>>
where
    I: 'static,
    T: Send + Sync + 'static,
    F: Future<Output = T> + 'static,
{
    let (value, set_value) = signal(None);
    let latest = StoredValue::new(0u64);
    Effect::new(move |_| {
        let request = fetch(inputs());
        let this = latest.get_value() + 1;
        latest.set_value(this);
        spawn_local(async move {
            let answer = request.await;
            if latest.try_get_value() == Some(this) {
                set_value.set(Some(answer));
            }
        });
    });
    value
}
