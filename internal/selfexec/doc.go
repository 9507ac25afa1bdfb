// Package selfexec runs copies of the running program as worker processes,
// the way the example programs spread one job over several processes that
// share a limit through Redis (examples/shared, examples/ingest
// -distributed).
//
// The program is its own worker: Run starts it again with an environment
// variable set, and the program's main (and its tests' TestMain, since a
// test binary is re-executed the same way) checks that variable first and,
// when it is set, does a worker's part instead of its usual one. A worker
// reports by writing lines to its stdout, which Run hands to the parent as
// they come; its stderr is passed through.
package selfexec
