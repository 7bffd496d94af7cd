//! The files of the instructor's runs that the class's WebSocket does not carry (weather maps,
//! step profiles, a run's config and logs beside its job log): a follower server fetches them
//! from the class listener when one of its pages asks, and keeps them in the copy's directory
//! ([`rundir::UPSTREAM_DIR`]), so the maps of a run that has ended cross the network once, and
//! stay readable when the class is out of reach. The class listener serves them for the
//! instructor's own runs only ([`instructors_runs_only`]).

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};
use hyper_util::rt::TokioIo;
use scalebook_shared::protocol::{ClassLink, ErrorCode, RunHandle, RunId};
use scalebook_shared::rundir;

use super::follow::Following;
use super::for_followers;
use super::tls::{self, Unreached};
use crate::Error;
use crate::refusal::ApiError;
use crate::runs::RunManager;

/// The largest file fetched from the class listener.
const MAX_BODY_BYTES: usize = 256 << 20;

/// A run's part a path names below `/runs/ID/` (`maps`, `maps/F`, `profile`, `profile/R`,
/// `files/N`), with the run.
fn run_part(path: &str) -> Option<(RunId, &str)> {
    let rest = path.trim_start_matches("/api").strip_prefix("/runs/")?;
    let (id, part) = rest.split_once('/')?;
    Some((RunId::parse(id).ok()?, part))
}

/// Whether a page's request for `part` of a class run goes upstream: the parts the copy does
/// not hold (its metrics, job log and record are copied as they stream).
fn from_upstream(part: &str) -> bool {
    let copied = [rundir::METRICS, rundir::JOB_LOG, rundir::RECORD].map(|name| format!("files/{name}"));
    ["maps", "profile", "files/"].iter().any(|p| part.starts_with(p)) && !copied.iter().any(|c| c == part)
}

/// Middleware of this server's API: a page's request for a part of a class run that only the
/// instructor's server has is answered from upstream (and kept), or from what was kept.
pub async fn class_run_files(State(following): State<Arc<Following>>, request: Request, next: Next) -> Response {
    let runs = following.runs();
    let Some((id, part)) = run_part(request.uri().path()).filter(|(_, part)| from_upstream(part)) else {
        return next.run(request).await;
    };
    let Some(record) = runs.record(&id).await else { return next.run(request).await };
    let Some(RunHandle::Class { upstream, .. }) = &record.handle else { return next.run(request).await };
    // A query (a window of a trace) is asked upstream each time; a whole part is kept.
    let query = request.uri().query().map(|q| format!("?{q}"));
    let kept = query.is_none().then(|| runs.store().run_dir(&id).join(rundir::UPSTREAM_DIR).join(part.replace('/', "__")));
    let read_kept = || async { tokio::fs::read(kept.as_ref().ok_or_else(|| std::io::Error::other("not kept"))?).await };
    // A run that has ended changes no more: what was fetched once stands.
    if record.state().is_final()
        && let Ok(bytes) = read_kept().await
    {
        return answer(StatusCode::OK, part, bytes);
    }
    let fetched = match following.link() {
        Some(link) => get(&link, &format!("/api/runs/{upstream}/{part}{}", query.as_deref().unwrap_or(""))).await,
        None => Err(Error::ClassLink("this server does not follow the class now".into())),
    };
    match fetched {
        Ok((status, bytes)) => {
            if status == StatusCode::OK
                && let Some(kept) = &kept
            {
                keep(kept.clone(), bytes.clone()).await;
            }
            answer(status, part, bytes)
        }
        Err(why) => match read_kept().await {
            Ok(bytes) => answer(StatusCode::OK, part, bytes),
            Err(_) => {
                let message = format!("run {id} is the instructor's, and its {part} cannot be fetched from the class: {why}");
                ApiError::new(StatusCode::BAD_GATEWAY, ErrorCode::Unreachable, message).into_response()
            }
        },
    }
}

/// Middleware of the class listener: a run's files only for the instructor's own runs (a
/// learner's run of `--viewer-runs`, or a class this server follows itself, is nobody's
/// business there).
pub async fn instructors_runs_only(State(runs): State<Arc<RunManager>>, request: Request, next: Next) -> Response {
    if let Some((id, _)) = run_part(request.uri().path()) {
        let shown = runs.record(&id).await.is_some_and(|record| for_followers(&record));
        if !shown {
            return ApiError::from(Error::UnknownRun { id }).into_response();
        }
    }
    next.run(request).await
}

/// The answer to a page: the bytes with the type their part has.
fn answer(status: StatusCode, part: &str, bytes: Vec<u8>) -> Response {
    let content_type = match part.rsplit('.').next() {
        _ if status != StatusCode::OK => "application/json",
        Some("png") => "image/png",
        Some("yaml") => "text/yaml; charset=utf-8",
        Some("log" | "sbatch") => "text/plain; charset=utf-8",
        _ => "application/json",
    };
    (status, [(header::CONTENT_TYPE, content_type)], Body::from(bytes)).into_response()
}

/// Keeps a fetched file (written aside and renamed, so a reader never sees half of it).
async fn keep(path: PathBuf, bytes: Vec<u8>) {
    let write = move || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let partial = path.with_extension("partial");
        std::fs::write(&partial, bytes)?;
        std::fs::rename(partial, path)
    };
    if let Ok(Err(e)) = tokio::task::spawn_blocking(write).await {
        tracing::warn!("cannot keep a class run's file: {e}");
    }
}

/// One GET from the class listener of `link`: its status and body.
async fn get(link: &ClassLink, path: &str) -> Result<(StatusCode, Vec<u8>), Error> {
    let tls = tls::reach(link).await.map_err(|unreached| match unreached {
        Unreached::Refused(why) | Unreached::Away(why) => Error::ClassLink(why),
    })?;
    let broken = |e: hyper::Error| Error::ClassLink(format!("the class listener's connection broke: {e}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(broken)?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(header::HOST, link.authority())
        .header(header::AUTHORIZATION, tls::bearer(link)?)
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .map_err(|e| Error::ClassRule { field: "path", rule: e.to_string() })?;
    let response = sender.send_request(request).await.map_err(|e| Error::ClassLink(format!("the class listener did not answer: {e}")))?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| Error::ClassLink(format!("the class listener's answer broke off: {e}")))?;
    Ok((status, body.to_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_parts_a_copy_lacks_go_upstream() {
        let (id, part) = run_part("/runs/i-r1/maps/epoch0001-t2m.png").unwrap();
        assert_eq!((id.as_str(), part), ("i-r1", "maps/epoch0001-t2m.png"));
        assert_eq!(run_part("/api/runs/r2/profile").map(|(_, p)| p), Some("profile"));
        assert!(run_part("/runs/../x").is_none() && run_part("/configs").is_none());
        for part in ["maps", "maps/epoch0001-u10.png", "profile", "profile/0", "files/config.yaml", "files/out.log"] {
            assert!(from_upstream(part), "{part}");
        }
        for part in ["files/metrics.jsonl", "files/job.log", "files/run.json", "x"] {
            assert!(!from_upstream(part), "{part}");
        }
    }
}
