package redislimit

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rategate/rategate/internal/redistest"
)

// server is the Redis server of this package's tests, started by TestMain:
// a real redis-server when installed, else the embedded miniredis.
var server *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	s, err := redistest.Start()
	if err != nil {
		log.Fatalf("redislimit tests: start a redis server: %v", err)
	}
	server = s
	os.Setenv("REDISLIMIT_TEST_ADDR", s.Addr) // for the examples
	fmt.Fprintf(os.Stderr, "redislimit tests: %s at %s\n", s.Kind(), s.Addr)
	goleak.VerifyTestMain(stopAfter{m, s})
}

// cluster is the 3-master Redis Cluster of the cluster tests: started by the
// first of them that runs (sharedCluster), stopped with the server.
var cluster struct {
	once sync.Once
	c    *redistest.Cluster
	err  error
}

// sharedCluster returns the tests' Redis Cluster, starting it at the first
// call. Tests sharing it use keys of their own (uniqueKey).
func sharedCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	cluster.once.Do(func() { cluster.c, cluster.err = redistest.StartCluster() })
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	return cluster.c
}

// stopAfter stops the servers once the tests have run, before goleak looks
// for leaked goroutines (the servers' own among them).
type stopAfter struct {
	m *testing.M
	s *redistest.Server
}

func (w stopAfter) Run() int {
	code := w.m.Run()
	if cluster.c != nil {
		cluster.c.Close()
	}
	w.s.Close()
	return code
}

// newClient returns a client of the test server, closed when t ends.
func newClient(t testing.TB) *redis.Client {
	c := server.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

// uniqueKey names a limit no other test, and no other run of this test
// (-count), uses.
func uniqueKey(t testing.TB) string {
	return t.Name() + "/" + strconv.FormatInt(time.Now().UnixNano(), 36)
}
