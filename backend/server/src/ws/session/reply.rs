//! How a session answers: an error answering a request, cut to bounds a client can trust, and
//! the error codes of the server's failures.

use scalebook_shared::Problems;
use scalebook_shared::protocol::{ErrorCode, ErrorReport, RequestId, RunId, ServerMessage, ServerReply};

use crate::Error;
use crate::refusal::internal_error;

pub(super) fn rate_limited() -> ErrorReport {
    ErrorReport::new(ErrorCode::RateLimited, "too many messages: they are dropped until you send fewer")
}

/// The most problems an error answer lists, and the most characters of each text in it: a
/// short request must never produce a long answer, whatever it held.
const MAX_PROBLEMS: usize = 32;
const MAX_TEXT_CHARS: usize = 500;

/// An error answering request `id`, cut to its bounds.
pub(super) fn error(id: Option<RequestId>, mut report: ErrorReport) -> ServerReply {
    let cut = |text: &mut String| {
        if let Some((at, _)) = text.char_indices().nth(MAX_TEXT_CHARS) {
            text.truncate(at);
            text.push('…');
        }
    };
    cut(&mut report.message);
    report.problems.0.truncate(MAX_PROBLEMS);
    for problem in &mut report.problems.0 {
        cut(&mut problem.field);
        cut(&mut problem.message);
    }
    ServerReply::answer(id, ServerMessage::Error(report))
}

/// The refusal of a class message: a rule it breaks named with its field (`what` says what did
/// not happen), a failure of this server's as [`report`] tells it.
pub(super) fn refusal(error: &Error, what: &str) -> ErrorReport {
    match error {
        Error::ClassRule { field, rule } => {
            let mut problems = Problems::default();
            problems.push(*field, rule.clone());
            ErrorReport::new(ErrorCode::BadMessage, what).with_problems(problems)
        }
        other => report(other, None),
    }
}

/// A failure of the server's as the client is told it, about `run` when it concerns one.
pub(super) fn report(error: &Error, run: Option<&RunId>) -> ErrorReport {
    let code = match error {
        Error::UnknownRun { .. } => ErrorCode::UnknownRun,
        Error::NotCancellable { .. } | Error::FollowedRun { .. } | Error::InstructorsRun { .. } | Error::SharedRun { .. } => {
            ErrorCode::NotCancellable
        }
        Error::SlurmScript(_) => ErrorCode::InvalidLaunch,
        Error::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
        Error::NotResumable { .. } => ErrorCode::NotResumable,
        _ => ErrorCode::Internal,
    };
    let message = match code {
        ErrorCode::Internal => internal_error(&error.to_string()),
        _ => error.to_string(),
    };
    let report = ErrorReport::new(code, message);
    match run {
        Some(run) => report.with_run(run.clone()),
        None => report,
    }
}
