//! A Server-Sent Events parser that takes bytes in chunks split anywhere.
//!
//! Lines end at `\n`, `\r\n` or a lone `\r` (the SSE grammar). Bytes are buffered until a line
//! is complete, so a multi-byte character or a JSON value that straddles two chunks is decoded
//! only once whole: splitting a body differently never changes the events.
//!
//! An event is dispatched at a blank line; a body that ends without one dispatches what it
//! holds at [`SseParser::finish`] (a stream cut there still yields its last complete `data:`).
//!
//! Two things make an event a [`Problem`] instead of text (SPEC §13): a line that is not valid
//! UTF-8 (never replaced: a corrupted stream is not decoded as if it were whole), and an event
//! over [`MAX_EVENT_BYTES`] (its bytes are dropped as they come, so memory stays bounded).

/// The most bytes one event may hold (its lines, buffered until the blank line): 64 MiB.
pub(crate) const MAX_EVENT_BYTES: usize = 64 << 20;

/// Why an event could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// A line of it is not valid UTF-8 (at this byte offset of the body).
    InvalidUtf8(usize),
    /// It holds more than [`MAX_EVENT_BYTES`].
    TooLarge,
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// Byte offset in the body of the event's first line (for error messages).
    pub offset: usize,
    /// Set when the event could not be read (its `data` is then empty).
    pub problem: Option<Problem>,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// The last byte fed was `\r` (a `\n` right after it ends nothing new).
    after_cr: bool,
    /// Byte offset of the next byte to be fed.
    offset: usize,
    /// Byte offset where `line` started.
    line_start: usize,
    /// The event being built.
    event: Option<String>,
    data: Option<String>,
    event_start: Option<usize>,
    /// What makes the event being built unreadable, if anything.
    problem: Option<Problem>,
    /// Comment lines seen (`: …`).
    pub comments: usize,
}

impl SseParser {
    /// Feeds bytes; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = bytes;
        while !rest.is_empty() {
            // The line's bytes up to the next line end are copied at once.
            let end = rest
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap_or(rest.len());
            let (text, tail) = rest.split_at(end);
            if !text.is_empty() {
                if self.line.is_empty() {
                    self.line_start = self.offset;
                }
                self.after_cr = false;
                if self.problem != Some(Problem::TooLarge) {
                    let held = self.line.len().saturating_add(self.held());
                    if held.saturating_add(text.len()) > MAX_EVENT_BYTES {
                        self.too_large();
                    } else {
                        self.line.extend_from_slice(text);
                    }
                }
                self.offset = self.offset.saturating_add(text.len());
            }
            let Some((&byte, tail)) = tail.split_first() else {
                break;
            };
            self.offset = self.offset.saturating_add(1);
            if byte == b'\n' && self.after_cr {
                self.after_cr = false;
            } else {
                self.after_cr = byte == b'\r';
                self.end_line(out);
            }
            self.line_start = self.offset;
            rest = tail;
        }
    }

    /// Ends the body: a last line without its newline and an event without its blank line are
    /// dispatched.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        // A body cut inside a character is cut short, not corrupt: the last line keeps its
        // whole characters.
        if let Err(error) = std::str::from_utf8(&self.line)
            && error.error_len().is_none()
        {
            self.line.truncate(error.valid_up_to());
        }
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.dispatch(out);
    }

    /// Bytes held for the event being built.
    fn held(&self) -> usize {
        let event = self.event.as_ref().map_or(0, String::len);
        let data = self.data.as_ref().map_or(0, String::len);
        event.saturating_add(data)
    }

    /// The event outgrew [`MAX_EVENT_BYTES`]: what it held is dropped, and so is the rest of
    /// it until its blank line.
    fn too_large(&mut self) {
        if self.event_start.is_none() {
            self.event_start = Some(self.line_start);
        }
        self.problem = Some(Problem::TooLarge);
        self.line = Vec::new();
        self.event = None;
        self.data = None;
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if self.problem == Some(Problem::TooLarge) {
            if line.is_empty() && self.line_start_is_blank() {
                self.dispatch(out);
            }
            return;
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            if self.event_start.is_none() {
                self.event_start = Some(self.line_start);
            }
            if self.problem.is_none() {
                self.problem = Some(Problem::InvalidUtf8(self.line_start));
            }
            return;
        };
        if text.starts_with(':') {
            self.comments = self.comments.saturating_add(1);
            return;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        if self.event_start.is_none() {
            self.event_start = Some(self.line_start);
        }
        if self.problem.is_some() {
            return;
        }
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => {
                if self.held().saturating_add(value.len()).saturating_add(1) > MAX_EVENT_BYTES {
                    self.too_large();
                    return;
                }
                match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_owned()),
                }
            }
            // `id`, `retry` and unknown fields carry nothing a codec needs.
            _ => {}
        }
    }

    /// Whether the line that just ended was blank: no byte of it was seen (a line of an
    /// over-large event is dropped as it comes, so `line` alone cannot say).
    fn line_start_is_blank(&self) -> bool {
        // `offset` is one past the line end; a blank line starts at its own end.
        self.offset.saturating_sub(1) == self.line_start
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        let start = self.event_start.take();
        let problem = self.problem.take();
        if problem.is_some() {
            self.data = None;
            out.push(SseEvent {
                event,
                data: String::new(),
                offset: start.unwrap_or(0),
                problem,
            });
        } else if let Some(data) = self.data.take() {
            out.push(SseEvent {
                event,
                data,
                offset: start.unwrap_or(0),
                problem: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        parser.finish(&mut out);
        out
    }

    #[test]
    fn crlf_comments_and_multiline_data() {
        let events = parse(&[b": hi\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: x\n\n"]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event.as_deref(), Some("a"));
        assert_eq!(events[0].data, "1\n2");
        assert_eq!(events[1].data, "x");
        assert_eq!(events[1].offset, 36);
    }

    #[test]
    fn split_inside_crlf_and_characters() {
        let body = "data: é\r\n\r\ndata: ü\r\n\r\n".as_bytes();
        let whole = parse(&[body]);
        for at in 0..=body.len() {
            let (a, b) = body.split_at(at);
            assert_eq!(parse(&[a, b]), whole, "split at {at}");
        }
        assert_eq!(whole[0].data, "é");
    }

    #[test]
    fn last_event_without_blank_line() {
        let events = parse(&[b"data: {\"a\":1}"]);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "{\"a\":1}");
    }
}
