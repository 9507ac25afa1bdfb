// Command metrics serves a small rate-limited HTTP API and the metrics of
// its limits, through package otellimit and the OpenTelemetry Prometheus
// exporter, on /metrics:
//
//   - GET /hello allows each client address a burst of -burst requests,
//     then one a minute (a token bucket per address); beyond that it
//     answers 429. Its decisions are recorded under the policy "hello".
//   - POST /reports runs one report at a time (a concurrency limit of 1);
//     others wait in line for up to 5 s. Recorded under "reports": the
//     time each waited, the time each held the worker.
//
// It sends -requests GETs to /hello and -reports POSTs to /reports at once,
// then fetches /metrics and prints its rategate_ lines.
//
//	go run ./examples/metrics
//	go run ./examples/metrics -addr localhost:8080   # serve until interrupted; curl localhost:8080/metrics
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

type config struct {
	Burst    int           // requests each client may send to /hello at once
	Requests int           // GET /hello requests the demo sends
	Reports  int           // POST /reports requests the demo sends at once
	Work     time.Duration // how long a report takes
}

// server is the API and its metrics.
type server struct {
	http.Handler
	provider *sdkmetric.MeterProvider
	metrics  *otellimit.Metrics
	close    []func() error
}

// newServer builds the API. Its limits' metrics go through an OpenTelemetry
// meter provider to a Prometheus registry of its own, served on /metrics.
func newServer(cfg config) (*server, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	s := &server{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))}
	s.metrics, err = otellimit.New(otellimit.Options{MeterProvider: s.provider})
	if err != nil {
		return nil, err
	}

	perClient, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Minute), Burst: cfg.Burst})
	if err != nil {
		return nil, err
	}
	hello, err := httplimit.New(s.metrics.Middleware(httplimit.Options{Keyed: perClient, Policy: "hello"}, nil))
	if err != nil {
		return nil, err
	}
	workers, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	reports, err := httplimit.New(s.metrics.Middleware(httplimit.Options{Limiter: workers, Wait: 5 * time.Second, Policy: "reports"}, nil))
	if err != nil {
		return nil, err
	}
	s.close = []func() error{perClient.Close, workers.Close}

	mux := http.NewServeMux()
	mux.Handle("GET /hello", hello.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello\n")
	})))
	mux.Handle("POST /reports", reports.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(cfg.Work):
			_, _ = io.WriteString(w, "report done\n")
		case <-r.Context().Done():
		}
	})))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.Handler = mux
	return s, nil
}

// Close stops the meter provider and closes the limiters.
func (s *server) Close() error {
	errs := []error{s.metrics.Close(), s.provider.Shutdown(context.Background())}
	for _, c := range s.close {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// demo sends the requests to base and returns the statuses it got, by
// path and status.
func demo(client *http.Client, base string, cfg config) (map[string]int, error) {
	var mu sync.Mutex
	got := map[string]int{}
	var errs []error
	send := func(method, path string) {
		req, err := http.NewRequest(method, base+path, nil)
		if err == nil {
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				got[fmt.Sprintf("%s %d", path, resp.StatusCode)]++
				mu.Unlock()
				return
			}
		}
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for range cfg.Requests {
		send(http.MethodGet, "/hello")
	}
	var wg sync.WaitGroup
	for range cfg.Reports {
		wg.Go(func() { send(http.MethodPost, "/reports") })
	}
	wg.Wait()
	return got, errors.Join(errs...)
}

// scrape fetches /metrics and returns its rategate_ sample lines, but the
// histograms' buckets.
func scrape(client *http.Client, base string) ([]string, error) {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "rategate_") && !strings.Contains(line, "_bucket{") {
			lines = append(lines, sc.Text())
		}
	}
	return lines, sc.Err()
}

// run serves the API on a loopback port, runs the demo against it and
// prints what it got and the scraped metrics.
func run(out io.Writer, cfg config) error {
	s, err := newServer(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String()

	got, err := demo(client, base, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "GET /hello: %d served, %d refused; POST /reports: %d served\n",
		got["/hello 200"], got["/hello 429"], got["/reports 200"])
	lines, err := scrape(client, base)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%s/metrics:\n%s\n", base, strings.Join(lines, "\n"))
	return nil
}

// serve serves the API on addr until interrupted.
func serve(addr string, cfg config) error {
	s, err := newServer(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	srv := &http.Server{Addr: addr, Handler: s, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Printf("serving on %s: GET /hello, POST /reports, GET /metrics\n", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func main() {
	cfg := config{Work: 100 * time.Millisecond}
	addr := flag.String("addr", "", "serve on this address until interrupted, instead of running the demo")
	flag.IntVar(&cfg.Burst, "burst", 5, "requests each client may send to /hello at once (then one a minute)")
	flag.IntVar(&cfg.Requests, "requests", 8, "GET /hello requests the demo sends")
	flag.IntVar(&cfg.Reports, "reports", 3, "POST /reports requests the demo sends at once")
	flag.Parse()
	var err error
	if *addr != "" {
		err = serve(*addr, cfg)
	} else {
		err = run(os.Stdout, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics:", err)
		os.Exit(1)
	}
}
