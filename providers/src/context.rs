//! What a `call_model` carries: the core's one model-call shape, [`runcore::ModelCall`].

/// The model call every `encode` takes: [`runcore::ModelCall`] (the agent's
/// [`ModelRequest::to_call`](runcore::ModelRequest::to_call), or a full-context `call_model`
/// line read with serde). Kept as a name for the codecs' input; it is the same type.
pub type CallModelContext = runcore::ModelCall;

/// A tool as the model sees it: [`runcore::ToolDefinition`], owned.
pub type ToolDefinition = runcore::ToolDefinition<'static>;
