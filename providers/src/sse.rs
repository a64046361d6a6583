//! A Server-Sent Events parser that takes bytes in chunks split anywhere.
//!
//! Lines end at `\n`, `\r\n` or a lone `\r` (the SSE grammar). Bytes are buffered until a line
//! is complete, so a multi-byte character or a JSON value that straddles two chunks is decoded
//! only once whole: splitting a body differently never changes the events.
//!
//! An event is dispatched at a blank line; a body that ends without one dispatches what it
//! holds at [`SseParser::finish`] (a stream cut there still yields its last complete `data:`).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// Byte offset in the body of the event's first line (for error messages).
    pub offset: usize,
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
                self.line.extend_from_slice(text);
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
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.dispatch(out);
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let text = String::from_utf8_lossy(&line);
        if text.starts_with(':') {
            self.comments = self.comments.saturating_add(1);
            return;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        if self.event_start.is_none() {
            self.event_start = Some(self.line_start);
        }
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            // `id`, `retry` and unknown fields carry nothing a codec needs.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        let start = self.event_start.take();
        if let Some(data) = self.data.take() {
            out.push(SseEvent {
                event,
                data,
                offset: start.unwrap_or(0),
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
