// Package redistest starts Redis servers for tests: a real redis-server on
// a free loopback port with no persistence when one is installed, else an
// embedded github.com/alicebob/miniredis/v2 server (and it says so), plus a
// 3-master Redis Cluster on loopback ports for tests that need one.
//
// Servers are processes of their own; on Linux they are killed when the
// process that started them dies, so a crashed test leaves none behind.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// ErrUnsupported is returned by fault helpers the embedded server cannot do.
var ErrUnsupported = errors.New("redistest: not supported by the embedded server")

// Server is one Redis server for tests.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string
	// Embedded is true when the server is the in-process miniredis, because
	// redis-server is not installed.
	Embedded bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	port int
	mini *miniredis.Miniredis
	args []string
	dir  string
}

// ServerPath returns the path of redis-server, or "" when not installed
// (or when the environment variable REDISTEST_EMBEDDED is set, which makes
// the tests run against the embedded server as on a machine without Redis).
func ServerPath() string {
	if os.Getenv("REDISTEST_EMBEDDED") != "" {
		return ""
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	return p
}

// Start starts a redis-server on a free loopback port with no persistence
// (--save "" --appendonly no), or, when redis-server is not installed, an
// embedded miniredis server, logging that it did. Stop it with Close.
//
// When the environment variable RATEGATE_REQUIRE_REDIS is set (CI sets it),
// a missing redis-server is an error instead: the embedded server must not
// stand in silently where the real one was installed for the tests.
func Start() (*Server, error) {
	if ServerPath() == "" {
		if os.Getenv("RATEGATE_REQUIRE_REDIS") != "" && os.Getenv("REDISTEST_EMBEDDED") == "" {
			return nil, errors.New("redistest: RATEGATE_REQUIRE_REDIS is set but redis-server is not on PATH")
		}
		m, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		log.Printf("redistest: redis-server is not installed; using the embedded miniredis server at %s", m.Addr())
		return &Server{Addr: m.Addr(), Embedded: true, mini: m}, nil
	}
	return StartReal()
}

// StartReal starts a real redis-server, with extra command-line arguments
// appended to the defaults; it fails when redis-server is not installed.
func StartReal(extra ...string) (*Server, error) {
	if ServerPath() == "" {
		return nil, errors.New("redistest: redis-server is not installed")
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--loglevel", "warning",
		}, extra...)
		if lastErr = s.launch(); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// launch starts the process with s.args and waits until it answers PING.
func (s *Server) launch() error {
	cmd := exec.Command(ServerPath(), s.args...)
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	if err := waitPing(s.Addr, exited, 10*time.Second); err != nil {
		cmd.Process.Kill()
		<-exited
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	waiters.Store(cmd, exited)
	return nil
}

// waiters maps a started *exec.Cmd to the channel closed when it exits.
var waiters sync.Map

func waitPing(addr string, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server on %s exited at start", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// Kind says which server this is, for logs: "redis-server" or "embedded miniredis".
func (s *Server) Kind() string {
	if s.Embedded {
		return "embedded miniredis"
	}
	return "redis-server"
}

// Kill stops the server abruptly (SIGKILL); its data is lost. Restart
// starts it again on the same address.
func (s *Server) Kill() {
	if s.mini != nil {
		s.mini.Close()
		return
	}
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	if ch, ok := waiters.LoadAndDelete(cmd); ok {
		<-ch.(chan struct{})
	}
}

// Restart starts a killed server again on the same address, empty.
func (s *Server) Restart() error {
	if s.mini != nil {
		s.mini.FlushAll()
		return s.mini.Restart()
	}
	var err error
	for range 50 { // the port may linger a moment after the kill
		if err = s.launch(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// Pause stalls every client of the server for d (CLIENT PAUSE d ALL): the
// server accepts commands but answers none until d has passed. It returns
// at once.
func (s *Server) Pause(d time.Duration) error {
	if s.mini != nil {
		return ErrUnsupported
	}
	return s.do("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL")
}

// Do runs one command on the server through a short-lived client.
func (s *Server) Do(args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

func (s *Server) do(args ...string) error {
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	_, err := s.Do(a...)
	return err
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	if s.mini != nil {
		s.mini.Close()
		return
	}
	s.Kill()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// Cluster is a Redis Cluster of three masters (no replicas) on loopback.
type Cluster struct {
	// Addrs are the masters' host:port addresses.
	Addrs []string
	nodes []*Server
}

// StartCluster starts three redis-server processes in cluster mode and joins
// them with `redis-cli --cluster create`. It needs redis-server and
// redis-cli; it fails without them (the embedded server has no cluster mode).
func StartCluster() (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil || ServerPath() == "" {
		return nil, errors.New("redistest: a cluster needs redis-server and redis-cli")
	}
	c := &Cluster{}
	for i := range 3 {
		n, err := StartReal("--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(i)+".conf",
			"--cluster-node-timeout", "5000")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitOK(20 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) waitOK(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, n := range c.nodes {
		for {
			v, err := n.Do("CLUSTER", "INFO")
			if s, _ := v.(string); err == nil && strings.Contains(s, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: cluster not ok on %s: %v %v", n.Addr, v, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Client returns a new cluster client; the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		n.Close()
	}
}

// Dir returns the directory of the server's files ("" when embedded).
func (s *Server) Dir() string { return filepath.Clean(s.dir) }
