//! The REST side of the API: the configs, the runs and their files. Everything live goes over
//! the WebSocket instead (jupyter-server-proxy buffers ordinary responses).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use scalebook_shared::cluster::Clusters;
use scalebook_shared::machine::MachineModel;
use scalebook_shared::profile::trace::{MAX_PIXELS, ProfileSummary, TraceList, Window};
use scalebook_shared::protocol::{ErrorCode, ErrorReport, RunId, RunRecord};
use scalebook_shared::rundir::{self, RankPlacement};
use scalebook_shared::weather::MapIndex;
use serde_json::json;
use tokio::io::AsyncReadExt as _;

use crate::Error;
use crate::code::{self, Snippet};
use crate::profiles;
use crate::refusal::ApiError;
use crate::runs::for_clients;
use crate::state::AppState;
use crate::store;
use crate::weather::maps;
use crate::weather::sample::{self, SampleQuery, SampleView};

/// Any other path under `/api`.
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("the API has no route {}", scalebook_shared::excerpt(uri.path())))
}

pub async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

pub async fn configs(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(json!({ "names": state.configs.file.names().collect::<Vec<_>>() }))
}

/// The configs as the server read them, typed, for the page (which then needs no YAML reader).
pub async fn configs_json(State(state): State<Arc<AppState>>) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], state.configs.json.clone()).into_response()
}

pub async fn configs_yaml(State(state): State<Arc<AppState>>) -> Response {
    (StatusCode::OK, [("content-type", "text/yaml; charset=utf-8")], state.configs.yaml.clone()).into_response()
}

/// The clusters file, read and validated on each request, for the browser's estimates: hardware
/// figures an instructor may tune while serving (Slurm submissions use the file as loaded at
/// start). Sent as JSON, so the browser needs no YAML reader for it.
pub async fn clusters(State(state): State<Arc<AppState>>) -> Result<Response, ApiError> {
    let path = &state.clusters.path;
    let text = tokio::fs::read_to_string(path).await.map_err(|e| ApiError::not_found(format!("cannot read {}: {e}", path.display())))?;
    let clusters = Clusters::parse(&text).map_err(|e| {
        let report = ErrorReport::new(ErrorCode::InvalidFile, format!("{}: {e}", path.display())).with_problems(e.problems());
        ApiError::from_report(StatusCode::UNPROCESSABLE_ENTITY, report)
    })?;
    Ok(Json(clusters).into_response())
}

/// This machine as local runs are predicted on it (`scalebook-train machine`'s measurement),
/// for the estimate block's "this machine" choice. Measured the first time if need be.
pub async fn machine(State(state): State<Arc<AppState>>) -> Result<Json<MachineModel>, ApiError> {
    let runs = state.runs.clone();
    let measured = tokio::task::spawn_blocking(move || runs.machine()).await.map_err(|e| ApiError::internal(e.to_string()))?;
    measured
        .map(Json)
        .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Internal, format!("this machine is not measured: {why}")))
}

pub async fn list_runs(State(state): State<Arc<AppState>>) -> Json<Vec<RunRecord>> {
    Json(state.runs.shown().await)
}

pub async fn get_run(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<RunRecord>, ApiError> {
    let id = RunId::parse(&id)?;
    Ok(Json(for_clients(state.runs.record(&id).await.ok_or(Error::UnknownRun { id })?)))
}

/// One of a run's files, from a fixed list (the log, the metrics, the record, the config).
pub async fn run_file(State(state): State<Arc<AppState>>, Path((id, name)): Path<(String, String)>) -> Result<Response, ApiError> {
    let id = known_run(&state, &id).await?;
    let path = state.runs.store().served_file(&id, &name).ok_or_else(|| {
        let names = rundir::SERVED.join(", ");
        ApiError::not_found(format!("a run has no file `{}` to serve; these are: {names}", name.escape_debug())).on("file")
    })?;
    let (body, len) = read_run_file(state.runs.store().run_dir(&id), &id, &name, &path).await?;
    let content_type = match name.rsplit('.').next() {
        Some("json") => "application/json",
        Some("jsonl") => "application/jsonl",
        Some("yaml") => "text/yaml; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    };
    Ok((StatusCode::OK, [("content-type", content_type.to_owned()), ("content-length", len.to_string())], body).into_response())
}

/// Which item of which file a code block shows.
#[derive(Debug, serde::Deserialize)]
pub struct CodeQuery {
    path: String,
    item: String,
}

/// One item of this project's sources, as the file on disk has it now (read off the async
/// workers).
pub async fn code(State(state): State<Arc<AppState>>, Query(query): Query<CodeQuery>) -> Result<Json<Snippet>, ApiError> {
    let root = state.source_root.clone();
    let found = tokio::task::spawn_blocking(move || code::snippet(&root, &query.path, &query.item))
        .await
        .map_err(|e| ApiError::internal(format!("reading the source stopped: {e}")))?;
    Ok(Json(found.map_err(|e| match e {
        // A file that cannot be read is not there for the page.
        Error::SourceUnreadable { .. } => ApiError::not_found(e.to_string()).on("path"),
        e => ApiError::from(e),
    })?))
}

/// The weather maps run `id` has drawn so far (an empty list before its first epoch ends).
pub async fn run_maps(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<MapIndex>, ApiError> {
    let id = known_run(&state, &id).await?;
    let index = maps::index(&state.runs.store().run_dir(&id)).await;
    index.map(Json).map_err(|e| match e.kind() {
        // A link the run left where its maps go: refused, as its other files are.
        std::io::ErrorKind::PermissionDenied => ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, format!("run {id}: {e}")),
        _ => ApiError::internal(format!("run {id}: {e}")),
    })
}

/// One of run `id`'s maps, by the name its index gives.
pub async fn run_map(State(state): State<Arc<AppState>>, Path((id, name)): Path<(String, String)>) -> Result<Response, ApiError> {
    let id = known_run(&state, &id).await?;
    let run_dir = state.runs.store().run_dir(&id);
    let path = maps::file(&run_dir, &name)
        .ok_or_else(|| ApiError::not_found(format!("`{}` is not a map: {}", name.escape_debug(), maps::NAME_RULE)).on("map"))?;
    let (body, len) = read_run_file(run_dir, &id, &name, &path).await?;
    // A map never changes once drawn; the index says when there are new ones.
    let headers = [
        ("content-type", "image/png".to_owned()),
        ("cache-control", "private, max-age=3600".to_owned()),
        ("content-length", len.to_string()),
    ];
    Ok((StatusCode::OK, headers, body).into_response())
}

/// One channel of one sample of a config's dataset, drawn, with its legend and latitude
/// weights. The same query always gives the same answer, so the browser may keep it a while.
pub async fn data_sample(State(state): State<Arc<AppState>>, Query(query): Query<SampleQuery>) -> Result<Response, ApiError> {
    let (request, config) = query.check(&state.configs.file)?;
    let view: SampleView = sample::draw_off_workers(request, config, &state.limits).await?;
    Ok(([("cache-control", "private, max-age=600")], Json(view)).into_response())
}

/// The ranks whose step-profile traces run `id` has written, by rank (an empty list before
/// its profiled steps are done, or for a run that profiles none).
pub async fn run_profile(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<TraceList>, ApiError> {
    let id = known_run(&state, &id).await?;
    let traces = profiles::list(&state.runs.store().run_dir(&id)).await;
    let traces = traces.map_err(|e| ApiError::internal(format!("run {id}: {e}")))?;
    Ok(Json(TraceList { traces }))
}

/// Run `id`'s profile in numbers (see [`profiles::summary`]): empty until its traces are
/// written.
pub async fn run_profile_summary(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<ProfileSummary>, ApiError> {
    let id = known_run(&state, &id).await?;
    let summary = profiles::summary(&state.runs.store().run_dir(&id)).await;
    Ok(Json(summary.map_err(|e| ApiError::internal(format!("run {id}: the profile's summary: {e}")))?))
}

/// What part of a trace a timeline asks for: `px` columns, and a window from `start` to
/// `end` (µs in the trace file's own clock) drawn at as many; nothing for the whole file.
#[derive(Debug, Default, serde::Deserialize)]
pub struct TraceQuery {
    px: Option<String>,
    start: Option<String>,
    end: Option<String>,
}

impl TraceQuery {
    /// The excerpt asked for (`None`: the whole file), or the field that breaks its rule.
    fn excerpt(&self) -> Result<Option<(u32, Option<Window>)>, ApiError> {
        let bad = |field: &str, message: String| ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message).on(field);
        let px = match (&self.px, &self.start, &self.end) {
            (None, None, None) => return Ok(None),
            (None, ..) => {
                return Err(bad("px", format!("a window of a trace is asked with px, the columns it is drawn at (1 to {MAX_PIXELS})")));
            }
            (Some(px), ..) => px.parse::<u32>().ok().filter(|px| (1..=MAX_PIXELS).contains(px)).ok_or_else(|| {
                bad("px", format!("`{}` is not a number of columns: px is a whole number from 1 to {MAX_PIXELS}", px.escape_debug()))
            })?,
        };
        let time = |field: &str, text: &String| {
            text.parse::<f64>().ok().filter(|t| t.is_finite()).ok_or_else(|| {
                bad(field, format!("`{}` is not a time: {field} is a finite number of µs in the trace's own clock", text.escape_debug()))
            })
        };
        let window = match (&self.start, &self.end) {
            (None, None) => None,
            (Some(start), Some(end)) => {
                let (start, end) = (time("start", start)?, time("end", end)?);
                if start >= end {
                    return Err(bad("end", format!("the window ends ({end}) before it starts ({start}): end must be after start")));
                }
                Some(Window::new(start, end))
            }
            (Some(_), None) => return Err(bad("end", "a window has both a start and an end; end is missing".into())),
            (None, Some(_)) => return Err(bad("start", "a window has both a start and an end; start is missing".into())),
        };
        Ok(Some((px, window)))
    }
}

/// Rank `rank`'s trace of run `id`: the Chrome-trace JSON as the profiler wrote it, or, when
/// the query asks (`px`, `start`, `end`), the excerpt a timeline draws ([`profiles::excerpt`]).
pub async fn run_profile_trace(
    State(state): State<Arc<AppState>>,
    Path((id, rank)): Path<(String, String)>,
    Query(query): Query<TraceQuery>,
) -> Result<Response, ApiError> {
    let id = known_run(&state, &id).await?;
    let run_dir = state.runs.store().run_dir(&id);
    let not_a_rank = || ApiError::not_found(format!("`{}` is not a rank: {}", rank.escape_debug(), profiles::RANK_RULE)).on("rank");
    let path = profiles::file(&run_dir, &rank).ok_or_else(not_a_rank)?;
    if let Some((px, window)) = query.excerpt()? {
        let number = rank.parse::<usize>().map_err(|_| not_a_rank())?;
        let excerpt = profiles::excerpt(&run_dir, number, window, px).await;
        let json = excerpt
            .map_err(|e| ApiError::internal(format!("run {id}: the profile of rank {rank}: {e}")))?
            .ok_or_else(|| ApiError::not_found(format!("run {id} has no readable profile of rank {rank}")).on("rank"))?;
        return Ok(([("content-type", "application/json")], json).into_response());
    }
    let (body, len) = read_run_file(run_dir, &id, &format!("profile of rank {rank}"), &path).await?;
    Ok((StatusCode::OK, [("content-type", "application/json".to_owned()), ("content-length", len.to_string())], body).into_response())
}

/// Where run `id`'s ranks ran (`placement/rank<R>.json`, written by each rank as it starts), by
/// rank; empty before they start. Only the ranks of the run's layout are read.
pub async fn run_placement(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Result<Json<Vec<RankPlacement>>, ApiError> {
    let id = known_run(&state, &id).await?;
    let world = state.runs.record(&id).await.map_or(0, |r| r.layout.world() as usize);
    let dir = state.runs.store().run_dir(&id).join(rundir::PLACEMENT_DIR);
    let places = tokio::task::spawn_blocking(move || placements(&dir, world)).await.map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(places))
}

/// The places the ranks below `world` wrote in `dir`, by rank. Read from the files there, not
/// tried rank by rank: a run's layout may claim a million ranks (a shared run's copy says what
/// its follower says), and only ranks that ran wrote a file.
fn placements(dir: &std::path::Path, world: usize) -> Vec<RankPlacement> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut ranks: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| rundir::placement_rank(&e.file_name().to_string_lossy()))
        .filter(|r| *r < world)
        .collect();
    ranks.sort_unstable();
    ranks
        .into_iter()
        .filter_map(|rank| std::fs::read_to_string(dir.join(rundir::placement_file(rank))).ok())
        .filter_map(|text| serde_json::from_str::<RankPlacement>(&text).ok())
        .collect()
}

/// The id in a path, of a run the server knows.
async fn known_run(state: &AppState, text: &str) -> Result<RunId, ApiError> {
    let id = RunId::parse(text)?;
    match state.runs.record(&id).await {
        Some(_) => Ok(id),
        None => Err(Error::UnknownRun { id }.into()),
    }
}

/// Run `id`'s file `name` at `path` (inside the run's directory `run_dir`) as a streamed
/// body: memory per request stays a buffer, whatever the file's size (a profile of hundreds of
/// MB). It is opened without following a link ([`store::open_beneath`]); one not written yet is
/// a 404 that says so, a link or anything but a plain file a 403.
async fn read_run_file(run_dir: std::path::PathBuf, id: &RunId, name: &str, path: &std::path::Path) -> Result<(Body, u64), ApiError> {
    let relative = path
        .strip_prefix(&run_dir)
        .map(std::path::Path::to_owned)
        .map_err(|_| ApiError::internal(format!("{name} of run {id} is outside its directory")))?;
    let opened = tokio::task::spawn_blocking(move || store::open_beneath(&run_dir, &relative));
    match opened.await.map_err(|e| ApiError::internal(e.to_string()))? {
        // As long as it is now: a log still being written is sent up to here.
        Ok(file) => {
            let len = file.metadata().map_err(|e| ApiError::internal(format!("cannot read {name} of run {id}: {e}")))?.len();
            Ok((Body::from_stream(chunks(tokio::fs::File::from_std(file).take(len))), len))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotYet, format!("run {id} has no {name} (yet)")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, format!("{name} of run {id} is not served: {e}")))
        }
        Err(e) => Err(ApiError::internal(format!("cannot read {name} of run {id}: {e}"))),
    }
}

/// A file's bytes in chunks of 64 KiB, ending at its end or at the first error.
fn chunks(file: tokio::io::Take<tokio::fs::File>) -> impl futures_util::Stream<Item = std::io::Result<Vec<u8>>> {
    const CHUNK: usize = 64 << 10;
    futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_are_the_files_of_ranks_within_the_world_in_rank_order() {
        let dir = tempfile::tempdir().unwrap();
        let place = |rank: usize| RankPlacement { rank, local_rank: rank % 4, node: format!("nid{}", rank / 4) };
        for rank in [5, 0, 2, 9] {
            std::fs::write(dir.path().join(rundir::placement_file(rank)), serde_json::to_string(&place(rank)).unwrap()).unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "not a rank").unwrap();
        // A layout of a million ranks reads the four files there, not a million names.
        assert_eq!(placements(dir.path(), 1 << 20), [place(0), place(2), place(5), place(9)]);
        assert_eq!(placements(dir.path(), 6), [place(0), place(2), place(5)], "a rank past the world is not the run's");
        assert_eq!(placements(&dir.path().join("none"), 4), []);
    }
}
