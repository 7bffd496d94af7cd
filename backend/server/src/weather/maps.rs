//! A run's weather maps, as the trainer leaves them in the run directory: the index of the maps
//! drawn so far and one PNG per epoch and channel. Only names of the trainer's own form are
//! served, so no request reaches any other file.

use std::io;
use std::path::{Path, PathBuf};

use scalebook_shared::rundir::{MAPS_DIR, MAPS_INDEX};
use scalebook_shared::weather::{MapIndex, is_map_file};

/// The maps of the run in `run_dir` so far: none before its first epoch has ended. Read as the
/// maps are ([`crate::store::open_beneath`]): never through a link (a `maps` that a job made a
/// link to another directory), which is refused, naming it.
pub async fn index(run_dir: &Path) -> io::Result<MapIndex> {
    let (dir, relative) = (run_dir.to_owned(), Path::new(MAPS_DIR).join(MAPS_INDEX));
    let read = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        crate::store::open_beneath(&dir, &relative).and_then(|mut file| io::Read::read_to_end(&mut file, &mut bytes)).map(|_| bytes)
    });
    match read.await.map_err(io::Error::other)? {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| io::Error::other(format!("{MAPS_DIR}/{MAPS_INDEX} does not parse: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MapIndex::default()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{MAPS_DIR}/{MAPS_INDEX} is not read: {e}"))),
    }
}

/// The path of map `name` in `run_dir`, or `None` unless `name` is a map's ([`is_map_file`]).
pub fn file(run_dir: &Path, name: &str) -> Option<PathBuf> {
    is_map_file(name).then(|| run_dir.join(MAPS_DIR).join(name))
}

/// The rule for [`file`]'s names, for an error message.
pub const NAME_RULE: &str =
    "a map is named epochNNNN-CHANNEL.png (e.g. epoch0001-t2m.png), or leadNNNh-CHANNEL.png for a rollout (e.g. lead024h-u10.png)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_trainers_names_are_map_files() {
        for good in ["epoch0001-t2m.png", "epoch0120-u10.png", "epoch12345-tcwv.png"] {
            assert!(is_map_file(good), "{good}");
        }
        let bad = [
            "epoch1-t2m.png",
            "epoch0001-t2m.PNG",
            "epoch0001-x.png",
            "epoch+001-t2m.png",
            "epoch0001-../t2m.png",
            "../index.json",
            "index.json",
            "epoch0001-t2m.png/..",
            "",
        ];
        for bad in bad {
            assert!(file(Path::new("/runs/r1"), bad).is_none(), "{bad}");
        }
        assert_eq!(file(Path::new("/runs/r1"), "epoch0002-u10.png"), Some(PathBuf::from("/runs/r1/maps/epoch0002-u10.png")));
    }

    #[tokio::test]
    async fn a_run_without_maps_has_an_empty_index() {
        let dir = tempfile::tempdir().unwrap();
        assert!(index(dir.path()).await.unwrap().maps.is_empty());
        std::fs::create_dir_all(dir.path().join(MAPS_DIR)).unwrap();
        std::fs::write(dir.path().join(MAPS_DIR).join(MAPS_INDEX), "{\"maps\": [").unwrap();
        assert!(index(dir.path()).await.unwrap_err().to_string().contains("does not parse"));
    }

    #[tokio::test]
    async fn an_index_behind_a_linked_maps_directory_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let (run, elsewhere) = (dir.path().join("run"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join(MAPS_INDEX), r#"{"maps": []}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, run.join(MAPS_DIR)).unwrap();
        let refused = index(&run).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{refused}");
        assert!(refused.to_string().contains("maps/index.json") && refused.to_string().contains("symbolic link"), "{refused}");
    }
}
