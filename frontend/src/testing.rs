//! Helpers for the component tests: mount a component into a fresh element of the test page,
//! let the reactive system settle, and act on the result as a user would.

use std::sync::Arc;
use std::time::Duration;

use leptos::mount::mount_to;
use leptos::prelude::*;
use scalebook_shared::config::ConfigFile;
use wasm_bindgen::{JsCast, JsValue};

use crate::library::Library;

/// The project's training configs, as the server serves them.
pub const CONFIGS: &str = include_str!("../shipped/ViT.yaml");

/// A mounted component; it is unmounted and removed when dropped.
pub struct Mounted {
    pub root: web_sys::HtmlElement,
    _handle: Box<dyn std::any::Any>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.root.remove();
    }
}

pub fn mount<V: IntoView + 'static>(view: impl FnOnce() -> V + 'static) -> Mounted {
    let root: web_sys::HtmlElement = document().create_element("div").unwrap().unchecked_into();
    document().body().unwrap().append_child(&root).unwrap();
    let handle = mount_to(root.clone(), view);
    Mounted { root, _handle: Box::new(handle) }
}

/// Provides (inside a view being mounted) the library a block that reads configs finds: the
/// project's configs, loaded; the clusters and the baseline never arrive.
pub fn provide_configs() {
    let file = Arc::new(ConfigFile::parse(CONFIGS).unwrap());
    provide_context(Library {
        configs: LocalResource::new(move || std::future::ready(Ok(file.clone()))),
        clusters: LocalResource::new(std::future::pending),
        baseline: LocalResource::new(std::future::pending),
    });
}

impl Mounted {
    pub fn find(&self, css: &str) -> Option<web_sys::Element> {
        self.root.query_selector(css).unwrap()
    }

    pub fn text(&self, css: &str) -> String {
        self.find(css).and_then(|e| e.text_content()).unwrap_or_default()
    }

    pub fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.find(css)?.get_attribute(name)
    }

    /// Types `value` into the field matching `css` (one `input` event, as a paste).
    pub fn input(&self, css: &str, value: &str) {
        let field = self.find(css).unwrap_or_else(|| panic!("no field {css}"));
        js_sys::Reflect::set(&field, &JsValue::from_str("value"), &JsValue::from_str(value)).unwrap();
        let event = web_sys::Event::new("input").unwrap();
        event.init_event_with_bubbles_and_cancelable("input", true, false);
        field.dispatch_event(&event).unwrap();
    }
}

/// Waits for effects and rendering to run (a few macrotask turns).
pub async fn settle() {
    for _ in 0..3 {
        let promise = js_sys::Promise::new(&mut |resolve, _| {
            set_timeout(move || drop(resolve.call0(&JsValue::NULL)), Duration::from_millis(10));
        });
        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    }
}
