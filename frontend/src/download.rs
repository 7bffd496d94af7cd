//! Saving text the page made (a CSV, an SVG) as a file, without a round trip to the server.

use wasm_bindgen::{JsCast, JsValue};

pub fn save(filename: &str, mime: &str, text: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(|_| "cannot make the file")?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| "cannot make a link to the file")?;
    let document = leptos::prelude::document();
    let link: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(|_| "cannot make a link")?.dyn_into().map_err(|_| "not a link")?;
    link.set_href(&url);
    link.set_download(filename);
    link.click();
    let _ = web_sys::Url::revoke_object_url(&url);
    Ok(())
}

/// A tag as part of a file name: `RMSE(u10m)/valid` → `RMSE_u10m__valid`.
pub fn file_stem(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn tags_become_safe_file_names() {
        assert_eq!(file_stem("RMSE(u10m)/valid"), "RMSE_u10m__valid");
        assert_eq!(file_stem("Learning Rate"), "Learning_Rate");
    }
}
