//! The static edition (`scalebook export DIR`): the page and every file it reads, written to a
//! directory any static web server serves as it is, at its root or under a path prefix, with no
//! Scalebook behind it and no token.
//!
//! What `scalebook serve` answers at a path, the export writes at that path: the page
//! (`index.html`, marked as the static edition, [`scalebook_shared::edition`]), its module (only
//! the build the page names, with its compressed copies for servers that send those), the
//! static files (chapters, the baseline, the style), the GPU recordings as the page fetches them
//! (a trace the server keeps only gzip-compressed, and sends as such, written out whole: a
//! static server does not pick `X.gz` for `X`), and the API's GET answers the pure blocks need
//! (`api/configs.json`, `api/clusters.json`, `api/machine.json`). A `code` block's listing is
//! an answer to a query (`api/code?path=…&item=…`), which a static server cannot give, so each
//! is a file of its own, named by [`scalebook_shared::edition::code_listing`].
//!
//! The directory appears whole or not at all: everything is written into a scratch directory
//! beside it, renamed into place at the end.

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use scalebook_shared::cluster::Clusters;
use scalebook_shared::edition;
use scalebook_shared::machine::MachineModel;

use crate::Error;
use crate::base_path::BasePath;
use crate::code;
use crate::static_files::{self, PAGE};

/// What an export reads.
#[derive(Debug)]
pub struct Sources<'a> {
    /// The directory `scalebook serve` serves (`static/`), with the built page.
    pub static_dir: &'a Path,
    /// The configs as the server would send them (`Configs::json`).
    pub configs_json: &'a str,
    pub clusters: &'a Clusters,
    /// The project whose sources the chapters' `code` blocks show.
    pub source_root: &'a Path,
    /// This machine's measurement, for the estimate's "this machine" (the machine that exported
    /// the edition); `None` leaves that choice without one.
    pub machine: Option<&'a MachineModel>,
    /// The URL path the edition will be served under, when known: the page then resolves its
    /// files from there whatever the address (`/PREFIX/index.html` included).
    pub base: Option<&'a BasePath>,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub files: usize,
    pub bytes: u64,
    /// How many `code` listings it holds.
    pub listings: usize,
    /// The page's module directory (`dist/scalebook-<hash>`).
    pub module: String,
}

/// Writes the static edition of `sources` to `out`, which must not exist yet or be an empty
/// directory.
pub fn export(sources: &Sources<'_>, out: &Path) -> Result<Exported, Error> {
    let target = |why: &str| Error::ExportTarget { path: out.to_owned(), why: why.to_owned() };
    match std::fs::read_dir(out).map(|mut entries| entries.next().is_none()) {
        Ok(true) => {}
        Ok(false) => return Err(target("it is not empty (export into a new or empty directory)")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Err(target("it is a file, not a directory")),
        Err(e) => return Err(target(&e.to_string())),
    }
    let name = out.file_name().ok_or_else(|| target("it names no directory"))?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| target(&e.to_string()))?;
    let scratch = parent.join(format!(".{}.exporting-{}", name.to_string_lossy(), std::process::id()));
    std::fs::create_dir(&scratch).map_err(|e| target(&format!("cannot write in {}: {e}", parent.display())))?;
    let written = write_edition(sources, &scratch).and_then(|exported| {
        // Onto an empty directory too: rename(2) replaces one.
        std::fs::rename(&scratch, out).map_err(|e| target(&e.to_string()))?;
        Ok(exported)
    });
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    written
}

/// Everything of the edition, into `dir`.
fn write_edition(sources: &Sources<'_>, dir: &Path) -> Result<Exported, Error> {
    static_files::check(sources.static_dir)?;
    let page_path = sources.static_dir.join(PAGE);
    let page = std::fs::read_to_string(&page_path).map_err(|source| Error::ExportFile { path: page_path.clone(), source })?;
    let module = module_dir(&page).ok_or_else(|| Error::ExportPage { path: page_path.clone(), why: "it names no module".into() })?;
    let mut out = Writer { dir, files: 0, bytes: 0 };
    out.write("index.html", static_page(&page, sources.base).map_err(|why| Error::ExportPage { path: page_path.clone(), why })?)?;
    out.copy_tree(&sources.static_dir.join(module), Path::new(module))?;
    for entry in read_dir(sources.static_dir)? {
        let name = entry.file_name();
        // The page is written above, its module with it; other builds' modules are not its.
        if name == "dist" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        out.copy_tree(&entry.path(), Path::new(&name))?;
    }
    out.write("api/configs.json", sources.configs_json.as_bytes().to_vec())?;
    out.write("api/clusters.json", json(sources.clusters)?)?;
    if let Some(machine) = sources.machine {
        out.write("api/machine.json", json(machine)?)?;
    }
    let mut listings = 0;
    let chapters = sources.static_dir.join("chapters");
    for entry in read_dir(&chapters)? {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| Error::ExportFile { path: path.clone(), source })?;
        for (file, item) in code::listed_in(&text) {
            let snippet = code::snippet(sources.source_root, &file, &item)
                .map_err(|e| Error::ExportListing { chapter: path.clone(), source: Box::new(e) })?;
            out.write(&format!("api/{}", edition::code_listing(&file, &item)), json(&snippet)?)?;
            listings += 1;
        }
    }
    Ok(Exported { files: out.files, bytes: out.bytes, listings, module: module.to_owned() })
}

/// The module directory `page` loads (`dist/scalebook-<hash>`, from its `data-module`).
fn module_dir(page: &str) -> Option<&str> {
    let named = page.split_once(r#"data-module=""#)?.1.split_once('"')?.0;
    let dir = named.rsplit_once('/')?.0;
    let plain = Path::new(dir).components().all(|c| matches!(c, Component::Normal(_)));
    (plain && dir.starts_with("dist/scalebook-")).then_some(dir)
}

/// The served page as the static edition: marked as such, and based at `base` when given. Both
/// go first in `<head>`, before the first relative URL is resolved.
fn static_page(page: &str, base: Option<&BasePath>) -> Result<Vec<u8>, String> {
    let (before, after) = page.split_once("<head>").ok_or("it has no <head>")?;
    let base = base.map(|b| format!("\n  <base href=\"{}/\">", b.as_str())).unwrap_or_default();
    Ok(format!("{before}<head>\n  {}{base}{after}", edition::meta_tag()).into_bytes())
}

fn json(value: &impl serde::Serialize) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(value).map_err(|e| Error::Io(std::io::Error::other(e)))
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, Error> {
    let entries = std::fs::read_dir(dir).and_then(|entries| entries.collect::<Result<Vec<_>, _>>());
    let mut entries = entries.map_err(|source| Error::ExportFile { path: dir.to_owned(), source })?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    Ok(entries)
}

/// Writes files below the edition's directory and counts them.
struct Writer<'a> {
    dir: &'a Path,
    files: usize,
    bytes: u64,
}

impl Writer<'_> {
    fn write(&mut self, relative: &str, bytes: Vec<u8>) -> Result<(), Error> {
        let path = self.dir.join(relative);
        let failed = |source| Error::ExportFile { path: path.clone(), source };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        std::fs::write(&path, &bytes).map_err(failed)?;
        self.files += 1;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// `from` (a file, or a directory and everything in it, links followed) at `to`. A file
    /// kept only gzip-compressed (`X.gz`, no `X` beside it, outside the module) is written
    /// whole as `X`: the server sends it for `X`, and the page asks for `X`.
    fn copy_tree(&mut self, from: &Path, to: &Path) -> Result<(), Error> {
        let read = |source| Error::ExportFile { path: from.to_owned(), source };
        if std::fs::metadata(from).map_err(read)?.is_dir() {
            for entry in read_dir(from)? {
                self.copy_tree(&entry.path(), &to.join(entry.file_name()))?;
            }
            return Ok(());
        }
        let kept_compressed = from.extension().is_some_and(|e| e == "gz") && !from.with_extension("").exists();
        if kept_compressed && !to.starts_with("dist") {
            let mut bytes = Vec::new();
            std::fs::File::open(from).and_then(|f| flate2::read::GzDecoder::new(f).read_to_end(&mut bytes)).map_err(read)?;
            return self.write(&to.with_extension("").to_string_lossy(), bytes);
        }
        self.write(&to.to_string_lossy(), std::fs::read(from).map_err(read)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE_TEXT: &str = r#"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <link rel="modulepreload" href="dist/scalebook-0123/scalebook.js"><script type="module" data-module="dist/scalebook-0123/scalebook" src="boot.js"></script>
</head>
<body></body>
</html>
"#;

    #[test]
    fn the_module_is_the_one_the_page_names() {
        assert_eq!(module_dir(PAGE_TEXT), Some("dist/scalebook-0123"));
        assert_eq!(module_dir(r#"<script data-module="dist/../etc/x">"#), None);
        assert_eq!(module_dir(r#"<script data-module="elsewhere/scalebook-1/scalebook">"#), None);
        assert_eq!(module_dir("<head></head>"), None);
    }

    #[test]
    fn the_page_is_marked_before_anything_relative_and_based_when_asked() {
        let marked = String::from_utf8(static_page(PAGE_TEXT, None).unwrap()).unwrap();
        let head = marked.split_once("<head>").unwrap().1;
        assert!(head.trim_start().starts_with(&edition::meta_tag()), "{marked}");
        assert!(!marked.contains("<base"));
        let base = BasePath::parse("/scalebook/").unwrap().unwrap();
        let based = String::from_utf8(static_page(PAGE_TEXT, Some(&base)).unwrap()).unwrap();
        let at = |needle: &str| based.find(needle).unwrap();
        assert!(at(r#"<base href="/scalebook/">"#) < at("<meta charset"), "{based}");
        assert!(static_page("<html></html>", None).is_err());
    }

    /// A static directory as the build leaves it: the page, two builds' modules, a chapter with
    /// a code block, a recording kept gzip-compressed.
    fn built_static(dir: &Path) {
        let write = |relative: &str, bytes: &[u8]| {
            let path = dir.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        };
        write(PAGE, PAGE_TEXT.as_bytes());
        write("dist/.inputs", b"abc");
        write("dist/scalebook-0123/scalebook_bg.wasm", b"\0asm");
        write("dist/scalebook-0123/scalebook_bg.wasm.gz", b"gz");
        write("dist/scalebook-old/scalebook_bg.wasm", b"\0asm");
        write("boot.js", b"// boot");
        write("chapters/index.json", br#"{"chapters": []}"#);
        write("chapters/one.md", b"# One\n\n```scalebook code path=backend/server/src/export.rs item=Writer::write\n```\n");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, b"{\"traceEvents\": []}").unwrap();
        write("recorded/r/rank0.trace.json.gz", &gz.finish().unwrap());
    }

    fn clusters() -> Clusters {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/clusters.yaml");
        Clusters::parse(&std::fs::read_to_string(root).unwrap()).unwrap()
    }

    fn sources<'a>(static_dir: &'a Path, clusters: &'a Clusters) -> Sources<'a> {
        let source_root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().parent().unwrap();
        Sources { static_dir, configs_json: "{}", clusters, source_root, machine: None, base: None }
    }

    #[test]
    fn an_export_holds_the_page_its_module_the_files_and_the_answers() {
        let root = tempfile::tempdir().unwrap();
        built_static(&root.path().join("static"));
        let clusters = clusters();
        let out = root.path().join("site");
        let exported = export(&sources(&root.path().join("static"), &clusters), &out).unwrap();
        assert_eq!(exported.module, "dist/scalebook-0123");
        assert_eq!(exported.listings, 1);
        let read = |relative: &str| std::fs::read(out.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"));
        assert!(String::from_utf8(read("index.html")).unwrap().contains(&edition::meta_tag()));
        assert_eq!(read("dist/scalebook-0123/scalebook_bg.wasm.gz"), b"gz", "the module's compressed copies stay as they are");
        assert!(!out.join("dist/scalebook-old").exists() && !out.join("dist/.inputs").exists());
        assert_eq!(read("recorded/r/rank0.trace.json"), b"{\"traceEvents\": []}");
        assert!(!out.join("recorded/r/rank0.trace.json.gz").exists());
        let listing: serde_json::Value =
            serde_json::from_slice(&read(&format!("api/{}", edition::code_listing("backend/server/src/export.rs", "Writer::write"))))
                .unwrap();
        assert!(listing["text"].as_str().unwrap().contains("fn write(&mut self"), "{listing}");
        assert_eq!(read("api/configs.json"), b"{}");
        assert!(!out.join("api/machine.json").exists());
        let leftovers: Vec<_> = std::fs::read_dir(root.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 2, "no scratch directory is left: {leftovers:?}");
    }

    #[test]
    fn a_directory_in_use_a_file_or_an_unbuilt_page_is_refused_and_nothing_is_left() {
        let root = tempfile::tempdir().unwrap();
        let static_dir = root.path().join("static");
        built_static(&static_dir);
        let clusters = clusters();
        let used = root.path().join("used");
        std::fs::create_dir(&used).unwrap();
        std::fs::write(used.join("keep.txt"), "mine").unwrap();
        let err = export(&sources(&static_dir, &clusters), &used).unwrap_err();
        assert!(err.to_string().contains("is not empty"), "{err}");
        assert_eq!(std::fs::read_to_string(used.join("keep.txt")).unwrap(), "mine");
        let err = export(&sources(&static_dir, &clusters), &used.join("keep.txt")).unwrap_err();
        assert!(err.to_string().contains("is a file"), "{err}");
        // An empty directory is taken.
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        export(&sources(&static_dir, &clusters), &empty).unwrap();
        assert!(empty.join("index.html").is_file());
        // A page that was never built: said, and no directory made.
        std::fs::remove_file(static_dir.join(PAGE)).unwrap();
        let err = export(&sources(&static_dir, &clusters), &root.path().join("new")).unwrap_err();
        assert!(matches!(err, Error::FrontendNotBuilt { .. }), "{err}");
        let names: Vec<_> = std::fs::read_dir(root.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 3, "static, used and empty only: {names:?}");
    }
}
