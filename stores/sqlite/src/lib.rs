//! The sqlite backend of runcore (work in progress).
