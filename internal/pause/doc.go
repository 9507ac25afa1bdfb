// Package pause is a sleep that a context can cut short, for the example
// programs: they wait between passes of retries, or for a window to pass,
// and must stop at once when their context ends (Ctrl-C, a test's end).
// time.Sleep cannot be interrupted; For can, and stops its timer either way.
package pause
