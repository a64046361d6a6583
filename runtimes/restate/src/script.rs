//! The scripted model and tools.
