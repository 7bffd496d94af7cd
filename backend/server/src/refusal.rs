//! How the REST side refuses: the status, and the same typed report the WebSocket answers with
//! (`{"code": ..., "message": ..., "problems": [{"field", "message"}], "run": ...}`), so a client
//! reads one vocabulary whichever way it asked. The crate's errors convert into it, so `?`
//! works in handlers. A failure of the server's own (a 500, or an `internal` answer on the
//! WebSocket) tells the client only that, with a reference; its cause, which may name the
//! server's paths, goes to the log under that reference ([`internal_error`]).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use scalebook_shared::protocol::{ErrorCode, ErrorReport};

use crate::Error;
use crate::token::Token;

/// A refused HTTP request.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    report: ErrorReport,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { status, report: ErrorReport::new(code, message) }
    }

    pub fn from_report(status: StatusCode, report: ErrorReport) -> ApiError {
        ApiError { status, report }
    }

    /// Names the part of the request that broke a rule (a path segment, a query field).
    pub fn on(mut self, field: &str) -> ApiError {
        let message = self.report.message.clone();
        self.report.problems.push(field, message);
        self
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, message)
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> ApiError {
        let message = error.to_string();
        match error {
            Error::UnknownRun { id } => {
                let refused = ApiError::new(StatusCode::NOT_FOUND, ErrorCode::UnknownRun, message);
                ApiError { report: refused.report.with_run(id), ..refused }
            }
            Error::NotSource { .. } => ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message).on("path"),
            Error::NoItem { .. } => ApiError::not_found(message).on("item"),
            Error::BadSample { field, .. } => ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::BadRequest, message).on(field),
            Error::NoData { field, .. } => ApiError::not_found(message).on(field),
            _ => ApiError::internal(message),
        }
    }
}

impl From<scalebook_shared::Error> for ApiError {
    /// A value of the request that breaks a rule of `shared` (a run id in a path).
    fn from(error: scalebook_shared::Error) -> ApiError {
        let report = ErrorReport::new(ErrorCode::BadRequest, error.to_string()).with_problems(error.problems());
        ApiError::from_report(StatusCode::BAD_REQUEST, report)
    }
}

impl IntoResponse for ApiError {
    fn into_response(mut self) -> Response {
        if self.status == StatusCode::INTERNAL_SERVER_ERROR {
            self.report.message = internal_error(&self.report.message);
        } else if self.status.is_server_error() {
            tracing::error!(status = %self.status, "request failed: {}", self.report.message);
        }
        (self.status, Json(self.report)).into_response()
    }
}

/// What a client is told of a failure of this server's own: that it is one, and a reference
/// to give whoever runs the server; `cause` goes to the log under that reference, never to
/// the client (it may hold the server's paths or the system's messages).
pub fn internal_error(cause: &str) -> String {
    let reference = Token::random::<4>().map_or_else(|_| "unknown".to_owned(), |t| t.as_str().to_owned());
    tracing::error!(reference, "internal error: {cause}");
    format!("internal error (reference {reference}): the server's log has its cause")
}

#[cfg(test)]
mod tests {
    use scalebook_shared::protocol::RunId;

    use super::*;

    #[test]
    fn the_crates_errors_become_reports_with_a_fitting_status() {
        let unknown = ApiError::from(Error::UnknownRun { id: RunId::parse("r1").unwrap() });
        assert_eq!((unknown.status, unknown.report.code), (StatusCode::NOT_FOUND, ErrorCode::UnknownRun));
        assert_eq!(unknown.report.run.as_ref().map(RunId::as_str), Some("r1"));
        let bad = ApiError::from(Error::BadSample { field: "channel", message: "at most 19".into() });
        assert_eq!((bad.status, bad.report.code), (StatusCode::BAD_REQUEST, ErrorCode::BadRequest));
        assert_eq!(bad.report.problems.0[0].field, "channel");
        let failed = ApiError::from(Error::Io(std::io::Error::other("disk full at /srv/runs")));
        assert_eq!((failed.status, failed.report.code), (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal));
        let id = ApiError::from(RunId::parse("../x").unwrap_err());
        assert_eq!((id.status, id.report.problems.0[0].field.as_str()), (StatusCode::BAD_REQUEST, "run"));
    }

    #[tokio::test]
    async fn a_500_tells_a_reference_and_keeps_its_cause_for_the_log() {
        let response = ApiError::from(Error::Io(std::io::Error::other("disk full at /srv/runs"))).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), 4096).await.unwrap();
        let report: ErrorReport = serde_json::from_slice(&body).unwrap();
        assert!(report.message.starts_with("internal error (reference "), "{}", report.message);
        assert!(!report.message.contains("/srv/runs") && !report.message.contains("disk full"), "{}", report.message);
    }
}
