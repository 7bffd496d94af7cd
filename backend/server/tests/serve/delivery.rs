//! How the page and the module travel: the build's brotli and gzip copies picked by
//! `Accept-Encoding`, other files compressed as sent, the content-hashed module cached for good
//! and everything else revalidated, so an upgrade never leaves a stale module in a browser.

use crate::harness::{Server, http_get};

const MODULE: &str = "dist/scalebook-0123456789abcdef_bg.wasm";

#[test]
fn the_module_travels_compressed_and_is_cached_for_good_while_the_page_is_revalidated() {
    let server = Server::start("delivery", &[]);
    let dir = &server.static_dir;
    std::fs::write(dir.join(MODULE), b"\0asm plain module").unwrap();
    std::fs::write(dir.join(format!("{MODULE}.br")), "brotli copy").unwrap();
    std::fs::write(dir.join(format!("{MODULE}.gz")), "gzip copy").unwrap();
    std::fs::create_dir_all(dir.join("chapters")).unwrap();
    std::fs::write(dir.join("chapters/intro.md"), "# Data parallelism\n".repeat(200)).unwrap();
    let addr = server.addr();
    let path = format!("/{MODULE}");

    // The build's copies, by what the browser accepts; brotli first when both are.
    for (accept, encoding, body) in [
        ("gzip, deflate, br, zstd", Some("br"), "brotli copy"),
        ("gzip", Some("gzip"), "gzip copy"),
        ("identity", None, "\0asm plain module"),
    ] {
        let response = http_get(addr, &path, &[("Accept-Encoding", accept)]);
        assert_eq!(response.status, 200, "{accept}");
        assert_eq!(response.header("content-encoding"), encoding, "{accept}");
        assert_eq!(response.body, body, "{accept}");
        assert_eq!(response.header("content-type"), Some("application/wasm"), "{accept}");
        assert_eq!(response.header("cache-control"), Some("public, max-age=31536000, immutable"), "{accept}");
    }

    // The page and the chapters: compressed as sent, and always checked with the server.
    let page = http_get(addr, "/", &[("Accept-Encoding", "identity")]);
    assert!(page.body.contains("<title>Scalebook</title>"), "{}", page.body);
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let chapter = http_get(addr, "/chapters/intro.md", &[("Accept-Encoding", "gzip")]);
    assert_eq!((chapter.status, chapter.header("content-encoding")), (200, Some("gzip")));
    assert_eq!(chapter.header("cache-control"), Some("no-cache"));
    // Revalidation answers "unchanged" without a body.
    let modified = page.header("last-modified").expect("a validator").to_owned();
    let again = http_get(addr, "/", &[("If-Modified-Since", &modified)]);
    assert_eq!((again.status, again.body.as_str()), (304, ""));
}

#[test]
fn the_clusters_file_reaches_the_browser_validated_and_as_json() {
    let dir = crate::harness::temp_dir("clusters");
    let file = dir.path().join("clusters.yaml");
    std::fs::copy(crate::harness::workspace().join("config/clusters.yaml"), &file).unwrap();
    let server = Server::start("clusters-json", &["--clusters", file.to_str().unwrap()]);
    let clusters = server.get("/api/clusters.json").json();
    assert_eq!(clusters["perlmutter"]["gpus_per_node"], 4, "{clusters}");

    // Edited while serving: read again on the next request, and refused with the field named.
    let text = std::fs::read_to_string(&file).unwrap().replace("gpus_per_node: 4", "gpus_per_node: 0");
    std::fs::write(&file, text).unwrap();
    let refused = server.get("/api/clusters.json");
    assert_eq!((refused.status, refused.json()["code"].as_str()), (422, Some("invalid_file")));
    assert_eq!(refused.json()["problems"][0]["field"], "perlmutter.gpus_per_node", "{}", refused.body);
    assert!(refused.json()["message"].as_str().unwrap().contains("perlmutter.gpus_per_node"), "{}", refused.body);
}
