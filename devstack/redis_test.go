package devstack_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/analyticsco/platform/devstack"
)

func TestRedisSurvivesRestart(t *testing.T) {
	t.Parallel()
	r := devstack.RedisForTest(t)
	url := r.URL
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := devstack.UniqueName(t, "k")

	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}

	pid := r.Pid()
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("redis-server pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.URL != url {
		t.Errorf("URL after restart = %s, want %s", r.URL, url)
	}
	// appendonly yes: the key written before the restart is still there.
	got, err := c.Get(ctx, key).Result()
	if err != nil || got != "v" {
		t.Errorf("get after restart = %q, %v; want \"v\"", got, err)
	}
}

func TestStartRedisWithoutBinaryNamesTheInstall(t *testing.T) {
	// Not parallel: it changes PATH for the process.
	t.Setenv("PATH", t.TempDir())
	_, err := devstack.StartRedis(context.Background(), t.TempDir(), "", nil)
	if !errors.Is(err, devstack.ErrRedisNotInstalled) {
		t.Fatalf("got %v, want ErrRedisNotInstalled", err)
	}
	const want = "redis-server not found: install it with `apt-get install -y redis-server`"
	if err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
}

func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	for _, prefix := range []string{"db", "Stream-Name.With/Odd*chars", "a_very_long_prefix_that_goes_beyond_forty_characters_easily", ""} {
		for range 10 {
			got := devstack.UniqueName(t, prefix)
			if len(got) > 40 {
				t.Errorf("UniqueName(%q) = %q: %d chars, want <= 40", prefix, got, len(got))
			}
			for _, r := range got {
				if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
					t.Errorf("UniqueName(%q) = %q: has %q", prefix, got, r)
				}
			}
			if seen[got] {
				t.Errorf("UniqueName(%q) = %q twice", prefix, got)
			}
			seen[got] = true
		}
	}
}

func TestRepoRootAndFreeAddr(t *testing.T) {
	root := devstack.RepoRoot(t)
	if _, err := os.Stat(root + "/go.work"); err != nil {
		t.Errorf("RepoRoot = %s without go.work: %v", root, err)
	}
	if a, b := devstack.FreeAddr(t), devstack.FreeAddr(t); a == "" || a == b {
		t.Errorf("FreeAddr gave %q and %q", a, b)
	}
}

// Every devstack Redis requires a password, so every client of the stack and the tests
// takes the password path: a client without it is refused (NOAUTH), one with a wrong
// one too, and the URL carries it; each server has its own.
func TestRedisRequiresItsPassword(t *testing.T) {
	t.Parallel()
	r, other := devstack.RedisForTest(t), devstack.RedisForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if r.Password == "" || r.Password == other.Password {
		t.Fatalf("passwords %q and %q: want one of its own for each server", r.Password, other.Password)
	}
	for name, o := range map[string]*redis.Options{
		"no password":    {Addr: r.Addr},
		"wrong password": {Addr: r.Addr, Password: other.Password},
	} {
		c := redis.NewClient(o)
		err := c.Set(ctx, "k", "v", 0).Err()
		_ = c.Close()
		if err == nil || !(strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS")) {
			t.Errorf("%s: %v, want the server's refusal", name, err)
		}
	}
	opts, err := redis.ParseURL(r.URL)
	if err != nil || opts.Password != r.Password {
		t.Fatalf("URL %q: password %q (%v), want the server's", r.URL, opts.Password, err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("with the URL's password: %v", err)
	}
}
