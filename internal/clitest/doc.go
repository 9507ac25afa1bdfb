// Package clitest is what the example programs' tests share to run their
// command lines as a user would type them, on a virtual clock.
//
// Each example has a function cli(ctx, args, stdout, stderr) int that is its
// main without the process around it. Run calls it once per Case, each in
// its own testing/synctest bubble (so a command line that runs the program
// takes no real time), and checks the exit status and what was printed:
// -h and a good command line exit 0, a wrong one exits 2 with nothing on
// stdout and a pointer to -h as the last line of stderr. Contains checks an
// output for the lines a test expects.
package clitest
