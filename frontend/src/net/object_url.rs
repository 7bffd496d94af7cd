//! Pictures from the API on the page. An `<img src>` cannot send the token's header, and the
//! token must not sit in a URL, so the page fetches the picture itself (with the header) and
//! shows it through an object URL, which it revokes once the picture is replaced or its block
//! goes: an object URL holds its bytes until it is revoked or the page closes.

use std::sync::Arc;

use leptos::prelude::*;

use super::fetch;

/// An object URL, revoked when the last holder drops it.
#[derive(Debug)]
pub struct ObjectUrl(String);

impl ObjectUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Drop for ObjectUrl {
    fn drop(&mut self) {
        let _ = web_sys::Url::revoke_object_url(&self.0);
    }
}

/// A picture fetched for `of` (what it shows, for the page's captions and attributes).
#[derive(Debug, Clone)]
pub struct Picture<T> {
    pub of: T,
    /// Its object URL, or why it could not be fetched.
    pub src: Result<Arc<ObjectUrl>, String>,
}

/// The picture at the API URL that `source` names (with what it shows), fetched whenever that
/// URL changes; the previous picture stays up until the next one is here, so stepping through
/// pictures does not flicker, and an answer for a URL no longer asked for is dropped.
pub fn api_picture<T>(source: impl Fn() -> Option<(T, String)> + Send + Sync + 'static) -> ReadSignal<Option<Picture<T>>>
where
    T: Clone + Send + Sync + 'static,
{
    let (shown, set_shown) = signal(None::<Picture<T>>);
    let asked = StoredValue::new(None::<String>);
    Effect::new(move |_| {
        let Some((of, url)) = source() else {
            asked.set_value(None);
            set_shown.set(None);
            return;
        };
        if asked.with_value(|a| a.as_deref() == Some(url.as_str())) {
            return;
        }
        asked.set_value(Some(url.clone()));
        leptos::task::spawn_local(async move {
            let src = fetch::blob(&url).await.and_then(|blob| {
                web_sys::Url::create_object_url_with_blob(&blob)
                    .map(|u| Arc::new(ObjectUrl(u)))
                    .map_err(|_| "cannot show the picture".into())
            });
            // Dropped (and so revoked) at once when another picture was asked for meanwhile.
            if asked.try_with_value(|a| a.as_deref() == Some(url.as_str())) == Some(true) {
                set_shown.try_set(Some(Picture { of, src }));
            }
        });
    });
    // The block goes: its picture's bytes go with it.
    on_cleanup(move || drop(set_shown.try_update_untracked(Option::take)));
    shown
}

impl<T> Picture<T> {
    /// The object URL to show, if the fetch succeeded.
    pub fn object_url(&self) -> Option<String> {
        self.src.as_ref().ok().map(|u| u.as_str().to_owned())
    }
}
