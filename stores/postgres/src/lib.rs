//! The postgres backend of runcore (work in progress).
