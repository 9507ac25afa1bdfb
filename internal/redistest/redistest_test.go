package redistest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ping pings s once: a client that retried would take over a second to
// find a killed server gone.
func ping(t *testing.T, s *Server) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

func TestStartKillRestart(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("server: %s at %s", s.Kind(), s.Addr)
	if err := ping(t, s); err != nil {
		t.Fatalf("ping a started server: %v", err)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := ping(t, s); err == nil {
		t.Fatal("ping a killed server: no error")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ping(t, s); err != nil {
		t.Fatalf("ping a restarted server: %v", err)
	}
	if v, _ := s.Do("EXISTS", "k"); v != int64(0) {
		t.Fatalf("a restarted server kept its data: EXISTS k = %v", v)
	}
}

func TestPause(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Pause(300 * time.Millisecond); err == ErrUnsupported {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ping(t, s); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("PING answered after %v during a 300ms pause", d)
	}
}

func TestCluster(t *testing.T) {
	if ServerPath() == "" {
		t.Skip("redis-server not installed")
	}
	c, err := StartCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl := c.Client()
	defer cl.Close()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := cl.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s on the cluster: %v", k, err)
		}
	}
	if n, err := cl.ClusterInfo(ctx).Result(); err != nil || len(n) == 0 {
		t.Fatal(n, err)
	}
}

// A connection to Refused is refused at once; one to Unreachable waits
// until the dialer's deadline.
func TestRefusedAndUnreachable(t *testing.T) {
	addr, err := Refused()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a connection to Refused() succeeded")
	}
	u, err := NewUnreachable()
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for range 2 {
		start := time.Now()
		c, err := net.DialTimeout("tcp", u.Addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			t.Fatal("a connection to Unreachable succeeded")
		}
		if d := time.Since(start); d < 190*time.Millisecond {
			t.Fatalf("a connection to Unreachable failed after %v (%v), not at the deadline", d, err)
		}
	}
}
