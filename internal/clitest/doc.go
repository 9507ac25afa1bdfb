// Package clitest is what the example programs' tests share to run them:
// their command lines as a user would type them, on a virtual clock, and
// their work with a configuration of the test's.
//
// Each example has a function cli(ctx, args, stdout, stderr) int that is its
// main without the process around it. Run calls it once per Case, each in
// its own testing/synctest bubble (so a command line that runs the program
// takes no real time), and checks the exit status and what was printed:
// -h and a good command line exit 0, a wrong one exits 2 with nothing on
// stdout and a pointer to -h as the last line of stderr.
//
// Each example also has a function run(ctx, w, cfg) (result, error) that
// does its work with the sizes in cfg and prints to w. MustRun calls it,
// logs what it printed and stops the test if it failed; Contains checks an
// output for the lines a test expects.
package clitest
