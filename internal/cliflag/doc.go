// Package cliflag is what the example programs share to read their command
// lines with the standard flag package: -h prints the usage to stdout and
// exits 0; an unknown flag, a bad value or an extra argument exits 2 with a
// message that names the flag and what was expected; a run that fails
// exits 1 with its error. Main is that whole sequence; Parse, ParseArgs and
// UsageError are its steps, for a program that needs its own; InRange,
// Positive and RequirePositive check flags' values, and RateVar reads a
// rate flag, with messages that name the flag; InOrder chains checks.
package cliflag
