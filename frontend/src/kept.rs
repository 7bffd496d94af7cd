//! Block states that outlive their chapter. A block's state normally lives and dies with the
//! block on screen; a sweep's must not: it goes on launching its variants while the learner
//! reads another chapter, and its block finds it again (progress, runs) on coming back. Such a
//! state is made once per key, under the app's reactive owner, and kept for the page's life.

use std::any::Any;
use std::collections::HashMap;

use leptos::prelude::*;

/// The kept states; provided as context by the app.
#[derive(Clone)]
pub struct Kept {
    owner: Owner,
    states: StoredValue<HashMap<String, Box<dyn Any>>, LocalStorage>,
}

impl Kept {
    /// The store, keeping what it makes as long as the owner it is made under (the app's).
    pub fn new() -> Kept {
        Kept { owner: Owner::current().expect("Kept is made inside the app"), states: StoredValue::new_local(HashMap::new()) }
    }

    /// The state kept under `key`, made by `make` (under the app's owner) the first time.
    pub fn get_or_make<T: Copy + 'static>(&self, key: &str, make: impl FnOnce() -> T) -> T {
        if let Some(state) = self.states.with_value(|states| states.get(key).and_then(|s| s.downcast_ref::<T>()).copied()) {
            return state;
        }
        let state = self.owner.with(make);
        self.states.update_value(|states| {
            states.insert(key.to_owned(), Box::new(state));
        });
        state
    }
}
