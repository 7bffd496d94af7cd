//! The data and maps blocks' endpoints on a real server: a dataset sample drawn from real HDF5
//! files (checked against the file itself), every bad query refused with its field, and a real
//! run's maps served by name and nothing else of the run directory.

use std::path::{Path, PathBuf};

use scalebook_shared::protocol::RunState;
use scalebook_shared::weather::{MAPPED_CHANNELS, MapIndex, latitude_weights};

use crate::harness::{Response, Server, temp_dir, tiny_data, tiny_overrides, workspace};

/// The project's configs plus three that read the tiny dataset: as `cpu_tiny` crops it, with a
/// crop larger than its fields, and from a directory no run may read.
fn configs_with_tiny_data(dir: &Path) -> PathBuf {
    let data = tiny_data().display().to_string();
    let project = std::fs::read_to_string(workspace().join("config/ViT.yaml")).unwrap();
    let extra = format!(
        "\nweather_tiny:\n  <<: *cpu_short\n  img_size: [36, 72]\n  limit_nsamples_val: 8\n  train_data_path: '{data}/train'\n  valid_data_path: '{data}/valid'\n\
         \nweather_too_large:\n  <<: *cpu_short\n  valid_data_path: '{data}/valid'\n\
         \nweather_elsewhere:\n  <<: *cpu_short\n  train_data_path: '/etc'\n"
    );
    let path = dir.join("ViT.yaml");
    std::fs::write(&path, project + &extra).unwrap();
    path
}

/// The width and height a PNG's header gives, after checking its signature.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

fn refused(response: &Response, status: u16, field: &str, says: &str) {
    let body = response.json();
    assert_eq!(response.status, status, "{body}");
    assert_eq!(body["problems"][0]["field"], field, "{body}");
    assert!(body["message"].as_str().unwrap().contains(says), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_channel_is_drawn_from_the_files_and_bad_queries_name_their_field() {
    let dir = temp_dir("weather-data");
    let yaml = configs_with_tiny_data(dir.path());
    let server = Server::start("weather-data", &["--yaml-config", yaml.to_str().unwrap()]);

    let response = server.get("/api/data/sample?config=weather_tiny&set=valid&index=3&channel=u10");
    let body = response.json();
    assert_eq!(response.status, 200, "{body}");
    assert!(response.header("cache-control").is_some_and(|c| c.contains("max-age")), "{:?}", response.headers);
    // One year of 48 steps, of which the config reads 8; sample 3 is step 3 (dt = 1).
    assert_eq!((body["samples"].as_u64(), body["used"].as_u64(), body["step"].as_u64()), (Some(48), Some(8), Some(3)), "{body}");
    assert_eq!(
        (body["channel"].as_str(), body["units"].as_str(), body["title"].as_str()),
        (Some("u10"), Some("m/s"), Some("eastward wind at 10 m"))
    );
    assert_eq!((body["height"].as_u64(), body["width"].as_u64()), (Some(36), Some(72)));
    let weights: Vec<f32> = serde_json::from_value(body["latitude_weights"].clone()).unwrap();
    assert_eq!(weights, latitude_weights(36));
    let png = body["png"].as_str().unwrap().strip_prefix("data:image/png;base64,").expect("a PNG data URL");
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(png).unwrap();
    assert_eq!(png_size(&png), (72, 36));

    // The range is the crop's own, read here from the same file.
    let file = tiny_data().join("valid").join(body["file"].as_str().unwrap());
    let slab = hdf5::File::open(&file).unwrap().dataset("fields").unwrap().read_slice_2d::<f32, _>((3, 0, 0..36, 0..72)).unwrap();
    let (lo, hi) = slab.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    assert!(lo < hi, "a flat field: {lo}");
    let range: [f32; 2] = serde_json::from_value(body["range"].clone()).unwrap();
    assert_eq!(range, [lo, hi]);
    let t2m = server.get("/api/data/sample?config=weather_tiny&set=valid&index=3&channel=t2m").json();
    assert_ne!(t2m["png"], body["png"], "another channel, another picture");

    let query = |q: &str| server.get(&format!("/api/data/sample?{q}"));
    refused(&query("config=weather_tiny&index=48"), 400, "index", "48 samples (0 to 47)");
    refused(&query("config=weather_tiny&index=two"), 400, "index", "not a sample number");
    refused(&query("config=weather_tiny&channel=temp"), 400, "channel", "not one of the 20 channels");
    refused(&query("config=weather_tiny&set=test"), 400, "set", "the sets are train and valid");
    refused(&query("config=no_such_config"), 400, "config", "no_such_config");
    refused(&query("config=weather_too_large&set=valid"), 404, "valid_data_path", "smaller than the 90 × 180");
    refused(&query("config=weather_elsewhere"), 404, "train_data_path", "outside the data directories");
    assert_eq!(http_without_token(&server).status, 401);
}

fn http_without_token(server: &Server) -> Response {
    crate::harness::http_get(server.addr(), "/api/data/sample", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_maps_are_listed_and_served_by_name_only() {
    let server = Server::start("weather-maps", &[]);
    let mut client = server.connect().await;
    let id = client.launch("cpu_tiny", tiny_overrides(&[])).await;
    // Before its first epoch ends a run has an empty list (or, on a fast machine, some maps).
    let early = server.get(&format!("/api/runs/{id}/maps"));
    assert_eq!(early.status, 200, "{}", early.body);
    let finished = server.wait_for(&id, |r| r.state().is_final().then(|| r.state())).await;
    assert_eq!(finished, RunState::Completed);
    let index: MapIndex = serde_json::from_str(&server.get(&format!("/api/runs/{id}/maps")).body).unwrap();
    // cpu_tiny trains 8 steps of 4 samples out of 16: two epochs, a map of each channel after each.
    for epoch in [1, 2] {
        for channel in MAPPED_CHANNELS {
            assert!(index.maps.iter().any(|m| m.channel == channel && m.epoch == epoch), "no {channel} map of epoch {epoch}: {index:?}");
        }
    }
    for entry in &index.maps {
        let response = server.get(&format!("/api/runs/{id}/maps/{}", entry.file));
        assert_eq!((response.status, response.header("content-type")), (200, Some("image/png")), "{}", entry.file);
        let (width, height) = png_size(&response.bytes);
        assert_eq!(height as usize, entry.height * entry.scale, "{entry:?}");
        assert!(width as usize > 4 * entry.width * entry.scale, "four panels side by side: {entry:?}");
    }

    // Nothing but a map's name reaches a file.
    for name in ["index.json", "..%2Frun.json", "epoch0001-t2m.png%2F..", "epoch1-t2m.png", "epoch0001-nope.png", "job.log"] {
        let response = server.get(&format!("/api/runs/{id}/maps/{name}"));
        assert_eq!(response.status, 404, "{name}: {}", response.body);
        assert!(!response.body.contains("\"epoch\""), "{name}: {}", response.body);
    }
    assert_eq!(server.get(&format!("/api/runs/{id}/maps/epoch9999-t2m.png")).json()["code"], "not_yet");
    assert_eq!(server.get("/api/runs/19990101-000000-9/maps").json()["code"], "unknown_run");
}
