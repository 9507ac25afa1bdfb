// Command rategate puts rategate's limiters into shell pipelines: a byte
// rate for a stream, a line rate for a log, and a start rate (with a
// concurrency bound) for a command run once per line.
//
// Install it with
//
//	go install github.com/rategate/rategate/cmd/rategate@latest
//
// or, in a clone of the repository, run it with go run ./cmd/rategate.
//
//	rategate pipe  -rate 2MiB/s [-burst 64KiB] [-q] [FILE...]
//	rategate lines -rate 100/s [-window smooth|strict] [-burst N]
//	rategate run   -rate 5/s -j 4 [-per-key FIELD] [-joblog FILE] -- COMMAND [ARG...] {}
//
// "rategate COMMAND -h" gives each command's flags.
//
// # The bound
//
// Every command keeps the same bound: at most the rate's N (bytes, lines or
// job starts) in ANY window of the rate's period, wherever the window
// starts, whatever came before: -rate 1MiB/s sends at most 1 MiB in every
// second, after an idle minute too, where pv -L lets the idle time's bytes
// through at once. Within the period, a token bucket of the same rate deals
// the permits out: at most BURST at once (by default a tenth of N), so at
// most BURST + N·t/PERIOD in any interval t. With demand above the rate the
// rate is reached: the bucket's burst makes up a wake-up that comes late,
// which a pacer that only spaces its grants cannot. lines and run take
// -window strict for the sliding log alone: up to N at once, then none until
// the first of them is a period old.
//
// The bound holds for the instants rategate is granted its permits; what
// a reader sees comes a moment later (a write, a pipe, the reader's own
// scheduling), which on a busy machine can be tens of milliseconds.
//
// # Sharing a limit
//
// With -redis ADDR -key NAME the limit lives in Redis (package redislimit):
// every rategate naming the same key, on any machine, shares one bound,
// decided at Redis's clock. The bucket and the log are then two limiters
// asked in turn (bucket first, its permits kept until the log grants them),
// so the log's bound holds exactly and the bucket's up to the time a grant
// waited for the log. A Redis that cannot be reached when rategate starts
// is an error. One that stops answering later (a timeout, a lost
// connection) is asked again every 100 ms for up to 10 s, nothing passing
// meanwhile, and then is an error: nothing ever passes without its permit.
//
// # run
//
// run is xargs -I {} with a rate, or GNU parallel with one: at most -j
// jobs at once, started in input order at the rate, with -per-key a rate per
// key (a field of the line, or the host of its URL) scheduled as
// pool.GoKey does, so a key at its rate holds up only its own lines. Its
// exit status is GNU parallel's (the number of failed jobs, 101 for more
// than 100), -joblog writes parallel's --joblog format, and Ctrl-C stops
// the starts, waits for the running jobs (which run in process groups of
// their own, so that the terminal's interrupt reaches rategate alone), and
// lists the lines that did not run; a second Ctrl-C passes the signal on to
// the jobs.
//
// # Exit status
//
// pipe and lines exit with 0 on success, 1 on an error while running (a
// read, a write, Redis), and 2 for bad input (a flag, a rate, a FILE that
// cannot be read), found before anything is done; run with the status
// above, 2 for bad input too, 128+N after signal N interrupted it, and 255
// for another error. pipe and lines end at once on an interrupt, as cat does,
// with what they had written. No command writes over a file it was given: pipe
// refuses a FILE that is also its stdout, and run -joblog only creates a
// new file.
package main
