package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// The distributed mode (-distributed): the same records are ingested by
// several worker processes (this program re-executed), each with its share
// of the records, into one store that the parent process serves over HTTP
// on loopback. No worker knows how fast the others send: they share the
// client rate through a redislimit.Partitioned limiter, whose partitions
// they lease in Redis and decide on locally, so the store, which keeps its
// own sliding log of the last second, never has to reject a write.

// workerEnv marks a worker process; its value is the worker's settings.
const workerEnv = "INGEST_WORKER"

// distConfig is the distributed mode's settings, beside config's sizes.
type distConfig struct {
	Processes  int
	Redis      string // address; "" starts a local server
	Partitions int
	LeaseTTL   time.Duration
}

var defaultDist = distConfig{Processes: 4, Partitions: 16, LeaseTTL: time.Second}

// validate says which distributed setting is wrong, by its flag's name.
func (d distConfig) validate(cfg config) error {
	switch {
	case cfg.Burst < d.Partitions:
		return fmt.Errorf("-burst must be at least -partitions (%d): each partition needs a unit of burst; got %d", d.Partitions, cfg.Burst)
	case d.Processes < 1 || d.Processes > 64:
		return fmt.Errorf("-processes must be from 1 to 64, got %d", d.Processes)
	case d.Partitions < 1 || d.Partitions > redislimit.MaxPartitions:
		return fmt.Errorf("-partitions must be from 1 to %d, got %d", redislimit.MaxPartitions, d.Partitions)
	case d.LeaseTTL < redislimit.MinPartitionLeaseTTL:
		return fmt.Errorf("-lease-ttl must be at least %v, got %v", redislimit.MinPartitionLeaseTTL, d.LeaseTTL)
	}
	return nil
}

// distResult is the outcome of a distributed run.
type distResult struct {
	Sent, Rejected, Stored int
	Time                   time.Duration // from starting the workers to their end
	Span                   time.Duration // from the store's first accepted write to its last
	Busiest                int           // most units the store accepted in any one second
	Workers                []workerResult
	Server                 string // which Redis: an address, "redis-server" or "embedded miniredis"
}

// workerResult is one worker's report, printed as its last line.
type workerResult struct {
	Records, Sent, Rejected, Passes, LeaseCalls int
}

func (w workerResult) String() string {
	return fmt.Sprintf("records=%d sent=%d rejected=%d passes=%d leasecalls=%d", w.Records, w.Sent, w.Rejected, w.Passes, w.LeaseCalls)
}

func parseWorkerResult(line string) (workerResult, error) {
	var w workerResult
	_, err := fmt.Sscanf(line, "records=%d sent=%d rejected=%d passes=%d leasecalls=%d", &w.Records, &w.Sent, &w.Rejected, &w.Passes, &w.LeaseCalls)
	return w, err
}

// runDistributed runs the distributed mode and prints its report to w.
func runDistributed(ctx context.Context, w io.Writer, cfg config, d distConfig) (distResult, error) {
	var res distResult
	if err := errors.Join(cfg.validate(), d.validate(cfg)); err != nil {
		return res, err
	}
	addr, stopRedis, kind, err := startRedis(d.Redis)
	if err != nil {
		return res, err
	}
	defer stopRedis()
	res.Server = kind
	fmt.Fprintf(w, "Redis: %s.\n", kind)

	st := newStore(cfg.StoreRate)
	url, stopStore, err := serveStore(st)
	if err != nil {
		return res, err
	}
	defer stopStore()

	key := fmt.Sprintf("ingest-%d", time.Now().UnixNano())
	if err := warmUp(ctx, w, addr, key, cfg, d); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "%d processes ingest %s records of %d units (%s units) into a store that accepts %s units per second,\n"+
		"sharing %s units a second (burst %s) through %d partitions leased in Redis (TTL %v).\n\n",
		d.Processes, thousands(cfg.Records), cfg.Units, thousands(cfg.Records*cfg.Units), thousands(cfg.StoreRate),
		thousands(cfg.ClientRate), thousands(cfg.Burst), d.Partitions, d.LeaseTTL)

	start := time.Now()
	res.Workers, err = runWorkers(ctx, cfg, d, addr, key, url)
	res.Time = time.Since(start)
	if err != nil {
		return res, err
	}
	for _, r := range res.Workers {
		res.Sent += r.Sent
		res.Rejected += r.Rejected
	}
	res.Stored = st.stored()
	res.Busiest = st.busiest()
	res.Span = st.span()
	printDistributed(w, cfg, res)
	if res.Stored != cfg.Records {
		return res, fmt.Errorf("the store holds %d of %d records", res.Stored, cfg.Records)
	}
	return res, nil
}

func printDistributed(w io.Writer, cfg config, res distResult) {
	for i, r := range res.Workers {
		fmt.Fprintf(w, "process %d: %s records, %s sent, %s rejected, %d lease calls to Redis\n",
			i+1, thousands(r.Records), thousands(r.Sent), thousands(r.Rejected), r.LeaseCalls)
	}
	units := float64(cfg.Records * cfg.Units)
	atStore := units / float64(cfg.StoreRate)
	atClients := max(units-float64(cfg.Burst), 0) / float64(cfg.ClientRate)
	fmt.Fprintf(w, "\nall: %s records sent, %s rejected, %s stored in %.2f s, %.2f s from the store's first write to its last\n"+
		"(ideal: %.2f s at the store's rate, %.2f s at the clients' shared rate).\n",
		thousands(res.Sent), thousands(res.Rejected), thousands(res.Stored), res.Time.Seconds(), res.Span.Seconds(), atStore, atClients)
	fmt.Fprintf(w, "The store's own log: at most %s units in any one second (its limit: %s).\n",
		thousands(res.Busiest), thousands(cfg.StoreRate))
}

// startRedis returns the address of the Redis to use: addr when given,
// else a redis-server started on a free loopback port when one is installed
// (on PATH), else an embedded server (github.com/alicebob/miniredis/v2). It
// also returns how to stop what it started, and which server it is.
func startRedis(addr string) (string, func(), string, error) {
	if addr != "" {
		return addr, func() {}, addr, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		addr, stop, err := startRedisServer(path)
		return addr, stop, "a local redis-server started for this run at " + addr, err
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, "", err
	}
	return m.Addr(), m.Close, "redis-server is not installed: an embedded server (miniredis) at " + m.Addr(), nil
}

// startRedisServer runs the redis-server at path on a free loopback port,
// keeping nothing on disk, and returns its address once it answers PING.
// It tries three ports, in case another program takes one first.
func startRedisServer(path string) (addr string, stop func(), err error) {
	for range 3 {
		if addr, stop, err = tryRedisServer(path); err == nil {
			return addr, stop, nil
		}
	}
	return "", nil, err
}

// tryRedisServer is one try of startRedisServer.
func tryRedisServer(path string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for redis-server to take
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() { cmd.Process.Kill(); <-exited }
	if err := awaitPong(addr, exited); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

// awaitPong waits, for up to 10 s, until the server at addr answers PING,
// or until it has exited.
func awaitPong(addr string, exited <-chan struct{}) error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			var reply string
			if _, err = io.WriteString(c, "PING\r\n"); err == nil {
				reply, err = bufio.NewReader(c).ReadString('\n')
			}
			c.Close()
			if reply == "+PONG\r\n" {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited at start", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %v", addr, err)
		}
	}
}

// warmUp takes the partitions once and gives them back, so that the run's
// clock does not include the restart guard of a freshly started server (no
// lease is used until one LeaseTTL after the server started, in case it
// restarted and forgot leases still in use).
func warmUp(ctx context.Context, w io.Writer, addr, key string, cfg config, d distConfig) error {
	lim, client, err := newPartitioned(addr, key, cfg, d)
	if err != nil {
		return err
	}
	defer client.Close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*d.LeaseTTL+10*time.Second)
	defer cancel()
	if _, err := lim.Acquire(ctx, 0); err != nil {
		return fmt.Errorf("take a first lease from Redis: %w", err)
	}
	lim.Close()
	if waited := time.Since(start); waited > 100*time.Millisecond {
		fmt.Fprintf(w, "Waited %.2f s for the first lease (a server started less than a lease TTL ago guards against a restart).\n", waited.Seconds())
	}
	return nil
}

func newPartitioned(addr, key string, cfg config, d distConfig) (*redislimit.Partitioned, *redis.Client, error) {
	client := redis.NewClient(&redis.Options{Addr: addr})
	lim, err := redislimit.NewPartitioned(redislimit.Options{Client: client, Key: key}, redislimit.PartitionedOptions{
		Rate: limiter.Per(cfg.ClientRate, time.Second), Burst: cfg.Burst, Partitions: d.Partitions, LeaseTTL: d.LeaseTTL,
	})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return lim, client, nil
}

// serveStore serves st on a loopback port: POST /write?id=N&units=U
// answers 204, or 429 when the store's second is full.
func serveStore(st *store) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		id, err1 := strconv.Atoi(r.URL.Query().Get("id"))
		units, err2 := strconv.Atoi(r.URL.Query().Get("units"))
		if err1 != nil || err2 != nil || units < 1 {
			http.Error(w, "bad id or units", http.StatusBadRequest)
			return
		}
		if err := st.write(record{ID: id, Units: units}); err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { srv.Close(); <-done }, nil
}

// runWorkers starts d.Processes workers, each with its share of the
// records, and waits for their reports.
func runWorkers(ctx context.Context, cfg config, d distConfig, addr, key, url string) ([]workerResult, error) {
	spec := func(i int) string {
		lo, hi := cfg.Records*i/d.Processes, cfg.Records*(i+1)/d.Processes
		return strings.Join([]string{addr, key, url, strconv.Itoa(lo), strconv.Itoa(hi), strconv.Itoa(cfg.Units),
			strconv.Itoa(cfg.ClientRate), strconv.Itoa(cfg.Burst), strconv.Itoa(d.Partitions), d.LeaseTTL.String(), cfg.Retry.String()}, " ")
	}
	last := make([]string, d.Processes) // each worker's report is its last line
	if err := startWorkers(ctx, d.Processes, spec, func(i int, line string) { last[i] = line }); err != nil {
		return nil, err
	}
	results := make([]workerResult, d.Processes)
	errs := make([]error, d.Processes)
	for i, line := range last {
		results[i], errs[i] = parseWorkerResult(line)
	}
	return results, errors.Join(errs...)
}

// startWorkers starts n copies of this program, copy i with workerEnv set
// to spec(i), passes each line that copy i writes to its stdout to
// line(i, text), one call at a time, and waits until they have all exited.
// Their stderr is this process's. Ending ctx kills the copies still running.
// It returns nil when every copy exited with status 0, else the failures,
// each naming its process from 1.
func startWorkers(ctx context.Context, n int, spec func(i int) string, line func(i int, text string)) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var mu sync.Mutex // serializes the calls of line
	var wg sync.WaitGroup
	for i := range n {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+spec(i))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			cancel() // the copies already started stop
			wg.Wait()
			return fmt.Errorf("start process %d: %w", i+1, err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				line(i, sc.Text())
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("process %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// workerMain is a worker process: it sends records [lo, hi) to the store,
// each waiting for its units from the shared Partitioned limiter, retrying
// rejected ones in passes as the single-process client does, and prints
// its report as its last line.
func workerMain(spec string, stdout io.Writer) error {
	f := strings.Fields(spec)
	if len(f) != 11 {
		return fmt.Errorf("bad %s: %q", workerEnv, spec)
	}
	ints := make([]int, 0, 6)
	for _, s := range []string{f[3], f[4], f[5], f[6], f[7], f[8]} {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("bad %s: %q", workerEnv, spec)
		}
		ints = append(ints, n)
	}
	ttl, err1 := time.ParseDuration(f[9])
	retry, err2 := time.ParseDuration(f[10])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	addr, key, url := f[0], f[1], f[2]
	lo, hi, units := ints[0], ints[1], ints[2]
	cfg := config{Units: units, ClientRate: ints[3], Burst: ints[4], Retry: retry}
	lim, client, err := newPartitioned(addr, key, cfg, distConfig{Partitions: ints[5], LeaseTTL: ttl})
	if err != nil {
		return err
	}
	defer client.Close()
	defer lim.Close()

	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer httpc.CloseIdleConnections()
	records := makeRecords(lo, hi, units)
	t, err := sendInPasses(context.Background(), records, lim, cfg.Retry, func(rec record) error { return post(httpc, url, rec) })
	if err != nil {
		return err
	}
	res := workerResult{Records: len(records), Sent: t.Sent, Rejected: t.Rejected, Passes: t.Passes, LeaseCalls: int(lim.LeaseCalls())}
	fmt.Fprintln(stdout, res)
	return nil
}

func post(c *http.Client, url string, rec record) error {
	resp, err := c.Post(fmt.Sprintf("%s/write?id=%d&units=%d", url, rec.ID, rec.Units), "", nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusTooManyRequests:
		return errThrottled
	}
	return fmt.Errorf("store: %s", resp.Status)
}
