//! Readable one-line texts of messages, commits, outputs, run states and tickets: the words of
//! the demo's timeline, shared by `runcore show` and `runcore pending` so that a store reads
//! the way the demo printed it.

use runcore::{
    Action, AgentEvent, AssistantBlock, AwaitTarget, ContentBlock, EndCause, LoopEvent, Message,
    Output, ResumeTicket, RunDisposition, RunState, StopReason, ThreadCommit,
};

/// An end cause as a short word (`natural_end`, `stopped (reason)`, `error (code)`).
pub fn cause_text(cause: &EndCause) -> String {
    match cause {
        EndCause::Stopped(reason) => format!("stopped ({reason})"),
        EndCause::Error(f) => format!("error ({})", f.code()),
        other => other.kind().to_owned(),
    }
}

/// A run state as a short phrase (`running`, `awaiting`, `ended: natural_end`).
pub fn state_text(state: &RunState) -> String {
    match state {
        RunState::Running => "running".to_owned(),
        RunState::Awaiting => "awaiting".to_owned(),
        RunState::Ended(cause) => format!("ended: {}", cause_text(cause)),
    }
}

fn blocks_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => format!("{text:?}"),
            ContentBlock::Image { mime_type, .. } => format!("<{mime_type} image>"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A message on one line: its role and its content, quoted.
pub fn message_text(message: &Message) -> String {
    match message {
        Message::System(m) => format!("system {}", blocks_text(&m.content)),
        Message::User(m) => format!("user {}", blocks_text(&m.content)),
        Message::Assistant(m) => {
            let mut parts: Vec<String> = m
                .content
                .iter()
                .map(|b| match b {
                    AssistantBlock::Text { text, .. } => format!("{text:?}"),
                    AssistantBlock::Thinking { .. } => "(thinking)".to_owned(),
                    AssistantBlock::RedactedThinking { .. } => "(redacted thinking)".to_owned(),
                    AssistantBlock::ToolCall { id, name, .. } => format!("call {name} [{id}]"),
                })
                .collect();
            // A failed or aborted answer says so (it often has no content at all).
            let stopped = match m.stop_reason {
                StopReason::Error => Some("error"),
                StopReason::Aborted => Some("aborted"),
                _ => None,
            };
            match (stopped, &m.error_message) {
                (Some(how), Some(error)) => parts.push(format!("({how}: {error:?})")),
                (Some(how), None) => parts.push(format!("({how})")),
                (None, _) => {}
            }
            parts.join(", ")
        }
        Message::ToolResult(r) => format!(
            "result [{}] {} {}",
            r.call_id,
            r.outcome.as_str(),
            blocks_text(&r.content)
        ),
    }
}

/// A message with who said it, for transcripts (`user`, `assistant`, `tool`, `system`).
pub fn transcript_line(message: &Message) -> String {
    match message {
        Message::Assistant(_) => format!("assistant {}", message_text(message)),
        Message::ToolResult(_) => format!("tool      {}", message_text(message)),
        Message::User(m) => format!("user      {}", blocks_text(&m.content)),
        Message::System(m) => format!("system    {}", blocks_text(&m.content)),
    }
}

/// What a ticket waits for (`permission for delete_file [call-delete]`, `manual pause`).
pub fn ticket_target_text(ticket: &ResumeTicket) -> String {
    match ticket.target() {
        AwaitTarget::ToolCall {
            call_id, tool: t, ..
        } => format!(
            "{} for {} [{call_id}]",
            ticket.target().reason_name(),
            t.name
        ),
        AwaitTarget::RemoteInput { call_id, .. } => {
            format!("{} [{call_id}]", ticket.target().reason_name())
        }
        AwaitTarget::Pause(_) => format!("{} pause", ticket.target().reason_name()),
    }
}

/// A ticket's deadline (`none`, or the host clock value in ms after which it is expired).
pub fn deadline_text(ticket: &ResumeTicket) -> String {
    match ticket.deadline_ms {
        Some(ms) => format!("{ms} ms"),
        None => "none".to_owned(),
    }
}

/// A commit on one line: its disposition, message count and audit kinds.
pub fn commit_text(commit: &ThreadCommit) -> String {
    let disposition = match &commit.run {
        RunDisposition::Running { run_id } => format!("Running {run_id}"),
        RunDisposition::Awaiting(t) => {
            format!("Awaiting {} on ticket {}", t.run_id, t.correlation_id)
        }
        RunDisposition::Ended { run_id, cause } => format!("Ended {run_id}: {}", cause_text(cause)),
    };
    let kinds: Vec<&str> = commit.events.iter().map(|e| e.kind()).collect();
    format!(
        "COMMIT  {disposition}, {} message(s){}",
        commit.messages.len(),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(", audit: {}", kinds.join(", "))
        }
    )
}

/// An output of the agent on one line, as the demo's timeline prints it.
pub fn output_text(output: &Output) -> String {
    match output {
        Output::Commit(commit) => commit_text(&commit.commit),
        Output::Action(Action::CallModel {
            step, final_step, ..
        }) => format!(
            "ACTION  call the model (step {step}{})",
            if *final_step { ", final" } else { "" }
        ),
        Output::Action(Action::ExecuteTools { calls, .. }) => format!(
            "ACTION  execute tools: {}",
            calls
                .iter()
                .map(|c| format!("{} [{}]", c.name, c.id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Output::Event(AgentEvent::RunStart { run_id, .. }) => format!("event   run_start {run_id}"),
        Output::Event(AgentEvent::RunEnd { run_id, result }) => format!(
            "event   run_end {run_id}: {} after {} step(s), {} unconsumed",
            cause_text(&result.cause),
            result.steps,
            result.unconsumed.len()
        ),
        Output::Event(AgentEvent::Loop { event, .. }) => match event {
            LoopEvent::TextDelta { text, .. } => format!("event   text {text:?}"),
            LoopEvent::ThinkingDelta { text, .. } => format!("event   thinking {text:?}"),
            LoopEvent::AssistantMessage { .. } => "event   assistant message".to_owned(),
            LoopEvent::MessageAppended { origin, message } => {
                format!("event   appended ({origin:?}): {}", message_text(message))
            }
            LoopEvent::ToolStart { call_id, name, .. } => {
                format!("event   tool_start {name} [{call_id}]")
            }
            LoopEvent::ToolEnd {
                call_id, outcome, ..
            } => format!("event   tool_end [{call_id}] {}", outcome.as_str()),
            LoopEvent::SyntheticResult {
                call_id, outcome, ..
            } => {
                format!("event   synthetic result [{call_id}] {}", outcome.as_str())
            }
            LoopEvent::Awaiting { ticket } => format!(
                "event   awaiting {} ({} {})",
                ticket.correlation_id,
                ticket.target().reason_name(),
                ticket
                    .target()
                    .call_id()
                    .map(|c| c.to_string())
                    .unwrap_or_default()
            ),
            LoopEvent::Resumed {
                correlation_id,
                result,
            } => {
                format!("event   resumed {correlation_id} with {}", result.as_str())
            }
            LoopEvent::InputClosed => "event   input closed".to_owned(),
            LoopEvent::Compacted { keep_from, removed } => format!(
                "event   compacted: the model context is the summary, then messages {keep_from}.. \
                 ({removed} message(s) left it)"
            ),
            other => format!("event   {other:?}"),
        },
        Output::Event(other) => format!("event   {other:?}"),
    }
}
