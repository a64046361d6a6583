//! runcore's whole conformance suite (SPEC §7, §7.1) against a real PostgreSQL server, one
//! fresh schema per case.

mod support;

// The expression below is what each generated test calls for its store. When there is no
// server it does not make one: `return` leaves the generated test (it is expanded inside the
// test's body) after `server()` has printed that it was skipped, or failed it under CI=true.
runcore::conformance_tests!(match support::server() {
    Some(server) => move || server.scratch(),
    None => return,
});
