//! The write routes: a permission decision from the JSON API (`POST /api/runs/{run}/decision`)
//! or from the page's Approve / Deny form (`POST /runs/{run}/decision`), and the form decoding.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use runcore::host::Answered;
use runcore::{PermissionDecision, RunId};
use serde_json::Value;

use crate::html;

use super::{AppState, Failure, bearer, json_response, secured, unauthorized, with_store};

/// The lease of the claim a decision takes: long enough for one recovery and one commit.
const DECISION_LEASE_MS: u64 = 30_000;

/// Answers `run` with `decision` now (wall clock, Unix-epoch milliseconds: SPEC §7.3).
async fn decide<S>(
    state: &AppState<S>,
    run: RunId,
    decision: PermissionDecision,
) -> Result<Answered, Failure>
where
    S: runcore::store::Store + Send + 'static,
{
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    // One claim attempt per decision (SPEC §12.5): a request id of its own, so two decisions
    // at once are two attempts and exactly one gets the thread.
    static DECISIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let attempt = DECISIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut claim = runcore::host::ClaimOptions::new(
        format!("console:{}", std::process::id()),
        DECISION_LEASE_MS,
    );
    claim.request_id = format!("decision.{now_ms}.{attempt}");
    with_store(state, move |s| {
        runcore::host::answer_permission(s, &run, decision, &claim, now_ms)
    })
    .await?
    .map_err(|e| Failure::of_answer(&e))
}

pub(super) async fn api_decision<S>(
    State(state): State<AppState<S>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    if !bearer(&headers).is_some_and(|given| state.token.matches(given)) {
        return unauthorized().json();
    }
    // An object only: serde would also read an internally tagged enum from an array.
    let decision = serde_json::from_slice::<Value>(&body).and_then(|value| {
        if value.is_object() {
            serde_json::from_value::<PermissionDecision>(value)
        } else {
            Err(serde::de::Error::custom("the body is not a JSON object"))
        }
    });
    let decision = match decision {
        Ok(decision) => decision,
        Err(e) => {
            return Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!(
                    "the body must be {{\"decision\":\"allow\",\"note\"?}} or \
                     {{\"decision\":\"deny\",\"reason\"?}}: {e}"
                ),
            )
            .json();
        }
    };
    if let Err(f) = check_decision_text(&decision) {
        return f.json();
    }
    match decide(&state, RunId::new(run_id), decision).await {
        Ok(answered) => json_response(StatusCode::OK, &answered),
        Err(f) => f.json(),
    }
}

/// The longest note or reason a decision may carry, in bytes: it is committed and shown on
/// every page of the thread, and a person's note is short.
pub(crate) const MAX_DECISION_TEXT: usize = 4096;

/// Refuses a note or reason over [`MAX_DECISION_TEXT`] (400, nothing written).
fn check_decision_text(decision: &PermissionDecision) -> Result<(), Failure> {
    let (name, text) = match decision {
        PermissionDecision::Allow { note } => ("note", note.as_deref()),
        PermissionDecision::Deny { reason } => ("reason", reason.as_deref()),
        #[allow(unreachable_patterns)]
        _ => ("note", None),
    };
    match text {
        Some(text) if text.len() > MAX_DECISION_TEXT => Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!(
                "the {name} is {} bytes, over the limit of {MAX_DECISION_TEXT} (4 KiB); nothing \
                 was written",
                text.len()
            ),
        )),
        _ => Ok(()),
    }
}

/// The Approve / Deny form: `token`, `decision` (`allow` | `deny`), `note` or `reason`.
pub(super) async fn form_decision<S>(
    State(state): State<AppState<S>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response
where
    S: runcore::store::Store + Send + 'static,
{
    let fields: BTreeMap<String, String> = match serde_urlencoded_pairs(&body) {
        Some(fields) => fields,
        None => {
            return Failure::new(StatusCode::BAD_REQUEST, "invalid_form", "a malformed form")
                .page(&state.store_label);
        }
    };
    let token_ok = fields
        .get("token")
        .map(String::as_str)
        .or_else(|| bearer(&headers))
        .is_some_and(|given| state.token.matches(given));
    if !token_ok {
        return unauthorized().page(&state.store_label);
    }
    let text = |name: &str| {
        fields
            .get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let decision = match fields.get("decision").map(String::as_str) {
        Some("allow") => PermissionDecision::Allow { note: text("note") },
        Some("deny") => PermissionDecision::Deny {
            reason: text("reason"),
        },
        _ => {
            return Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_form",
                "the form's decision must be allow or deny",
            )
            .page(&state.store_label);
        }
    };
    let verb = if matches!(decision, PermissionDecision::Deny { .. }) {
        "deny"
    } else {
        "allow"
    };
    if let Err(f) = check_decision_text(&decision) {
        return f.page(&state.store_label);
    }
    let run = RunId::new(run_id.as_str());
    match decide(&state, run, decision).await {
        Ok(answered) => {
            let location = format!(
                "/pending?answered={}&decision={verb}&version={}",
                html::path_segment(&run_id),
                answered.version
            );
            secured((StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response())
        }
        Err(f) => f.page(&state.store_label),
    }
}

/// `application/x-www-form-urlencoded` pairs (`+` is a space), or `None` when a value is not
/// valid percent-encoded UTF-8.
fn serde_urlencoded_pairs(body: &[u8]) -> Option<BTreeMap<String, String>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut fields = BTreeMap::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        fields.insert(form_decode(key)?, form_decode(value)?);
    }
    Some(fields)
}

fn form_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut input = text.bytes();
    while let Some(byte) = input.next() {
        match byte {
            b'+' => bytes.push(b' '),
            b'%' => {
                let high = char::from(input.next()?).to_digit(16)?;
                let low = char::from(input.next()?).to_digit(16)?;
                bytes.push(u8::try_from(high * 16 + low).ok()?);
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_plus_and_percent() {
        let fields = serde_urlencoded_pairs(b"token=ab&note=looks+fine%21&decision=allow").unwrap();
        assert_eq!(fields["note"], "looks fine!");
        assert_eq!(fields["decision"], "allow");
        assert!(serde_urlencoded_pairs(b"note=%ZZ").is_none());
        assert!(serde_urlencoded_pairs(b"note=%FF").is_none());
    }
}
