package selfexec

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// workerKey makes this test binary, re-executed by Run, a worker: it
// prints its value and its value times ten, says hello on stderr, and
// exits with status 3 if its value is 13.
const workerKey = "SELFEXEC_TEST_WORKER"

func TestMain(m *testing.M) {
	if v := os.Getenv(workerKey); v != "" {
		n, _ := strconv.Atoi(v)
		fmt.Println(n)
		fmt.Println(n * 10)
		fmt.Fprintf(os.Stderr, "hello from %d\n", n)
		if n == 13 {
			os.Exit(3)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// run runs n workers with the values values[i] and returns each one's
// lines, what they wrote to stderr, and Run's error. Its line function takes
// no lock: Run serializes its calls and the writes to stderr (the race
// detector checks).
func run(t *testing.T, values []int) ([][]string, string, error) {
	t.Helper()
	lines := make([][]string, len(values))
	var out bytes.Buffer // the workers' stderr, and a line per report
	err := Run(t.Context(), len(values), workerKey,
		func(i int) string { return strconv.Itoa(values[i]) },
		&out,
		func(i int, text string) {
			lines[i] = append(lines[i], text)
			fmt.Fprintf(&out, "worker %d said %s\n", i, text)
		})
	return lines, out.String(), err
}

func TestRun(t *testing.T) {
	lines, stderr, err := run(t, []int{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range lines {
		// Each worker got its own value, and its lines came in order.
		if want := []string{strconv.Itoa(i + 1), strconv.Itoa(10 * (i + 1))}; !slices.Equal(got, want) {
			t.Errorf("worker %d printed %q, want %q", i, got, want)
		}
		if !strings.Contains(stderr, fmt.Sprintf("hello from %d\n", i+1)) {
			t.Errorf("stderr %q lacks worker %d's", stderr, i+1)
		}
	}
}

func TestRunFailure(t *testing.T) {
	lines, _, err := run(t, []int{1, 13, 2})
	if err == nil || err.Error() != "process 2: exit status 3" {
		t.Errorf("Run = %v, want process 2: exit status 3", err)
	}
	if len(lines[0]) != 2 || len(lines[1]) != 2 || len(lines[2]) != 2 {
		t.Errorf("lines %q: want two from every worker, the failing one too", lines)
	}
}

func TestRunNone(t *testing.T) {
	if err := Run(t.Context(), 0, workerKey, nil, nil, nil); err != nil {
		t.Errorf("Run of no workers: %v", err)
	}
}
