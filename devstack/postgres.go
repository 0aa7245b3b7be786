package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/analyticsco/platform/devstack/internal/proc"
)

// ErrPostgresNotInstalled is returned when Debian's PostgreSQL server is not installed.
var ErrPostgresNotInstalled = errors.New("PostgreSQL server not found: install it with `apt-get install -y postgresql` (Debian's package)")

// postgresUser is the account the server runs as when devstack runs as root: PostgreSQL
// refuses to run as root. Debian's postgresql package creates it.
const postgresUser = "postgres"

// Postgres is a PostgreSQL server child process (Debian's package) with its cluster in
// Dir, reachable only through a Unix socket in a private directory: no TCP port, so no
// port to collide on. It dies with the parent (Pdeathsig). Run as root, it runs as the
// postgres account, which owns Dir.
type Postgres struct {
	Dir string

	logger    *slog.Logger
	bin       string // the directory of initdb and postgres
	socketDir string
	// tempSocketDir: socketDir is a temp dir of its own, removed by Close.
	tempSocketDir bool
	throwaway     bool
	cred          *syscall.Credential // nil: run as ourselves

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan error
	closed bool
}

// postgresSettings are the server's settings (postgres -c): what devstack's FerretDB needs
// and what a local stack can afford.
var postgresSettings = []string{
	"listen_addresses=",
	// FerretDB sends its filters as prepared statements with the field name a parameter
	// (_jsonb->$1 @> $2); only a plan made for the values can use an index on _jsonb->'dep'.
	"plan_cache_mode=force_custom_plan",
	// A commit returns before its WAL is flushed: a crash of the machine may lose the last
	// fraction of a second of writes, never consistency (fsync stays on). A stopped or
	// killed stack keeps everything.
	"synchronous_commit=off",
	"max_connections=200",
	"shared_buffers=64MB",
	"shared_preload_libraries=pg_stat_statements",
	"pg_stat_statements.track=all",
	"log_min_messages=warning",
	"log_checkpoints=off",
	"dynamic_shared_memory_type=mmap",
}

// StartPostgres starts the server on the cluster in dir, creating the cluster on first use
// (initdb), and waits until it accepts connections. ctx bounds startup only.
func StartPostgres(ctx context.Context, dir string, logger *slog.Logger) (*Postgres, error) {
	return startPostgres(ctx, dir, logger, false)
}

// startPostgres is StartPostgres; a throwaway cluster (a test process's) never flushes
// to disk (fsync off): a crash of the machine may corrupt it, and nobody needs it then.
func startPostgres(ctx context.Context, dir string, logger *slog.Logger, throwaway bool) (*Postgres, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("devstack: postgres dir %q: %w", dir, err)
	}
	p := &Postgres{Dir: abs, bin: bin, logger: logger.With("component", "postgres"), throwaway: throwaway}
	if os.Geteuid() == 0 {
		if p.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if err := p.prepareDirs(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.initdb(ctx); err != nil {
		return nil, err
	}
	if err := p.makeSocketDir(); err != nil {
		return nil, err
	}
	if err := p.startLocked(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// postgresBinDir finds initdb and postgres: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (the newest version installed).
func postgresBinDir() (string, error) {
	if path, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(path), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d, nil
			}
		}
	}
	return "", ErrPostgresNotInstalled
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(postgresUser)
	if err != nil {
		return nil, fmt.Errorf("devstack: PostgreSQL refuses to run as root and there is no %q account to run it as (Debian's postgresql package creates it): %w", postgresUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// prepareDirs creates the cluster directory, owned by the account the server runs as.
// That account must be able to reach Dir: every ancestor it cannot search (a test's 0700
// temp dir) gets search permission for others, never read.
func (p *Postgres) prepareDirs() error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fmt.Errorf("devstack: postgres dir: %w", err)
	}
	if p.cred == nil {
		return os.Chmod(p.Dir, 0o700)
	}
	if err := os.Chown(p.Dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
		return fmt.Errorf("devstack: give %s to %s: %w", p.Dir, postgresUser, err)
	}
	for d := filepath.Dir(p.Dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if mode := fi.Mode().Perm(); mode&0o001 == 0 {
			if err := os.Chmod(d, mode|0o001); err != nil {
				return fmt.Errorf("devstack: let %s reach %s: %w", postgresUser, p.Dir, err)
			}
			p.logger.Info("gave others search permission so that PostgreSQL can reach its cluster", "dir", d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// makeSocketDir is where the server's socket goes: Dir/sockets (only its account can
// enter Dir), or a private temp dir when that path is too long for a socket address.
func (p *Postgres) makeSocketDir() error {
	p.socketDir = filepath.Join(p.Dir, "sockets")
	const maxSocketPath = 107 // sun_path, less the terminating NUL
	if len(p.socketDir+"/.s.PGSQL.5432") > maxSocketPath {
		dir, err := os.MkdirTemp("", "devstack-pg-")
		if err != nil {
			return fmt.Errorf("devstack: postgres socket dir: %w", err)
		}
		p.socketDir, p.tempSocketDir = dir, true
	} else if err := os.MkdirAll(p.socketDir, 0o700); err != nil {
		return fmt.Errorf("devstack: postgres socket dir: %w", err)
	}
	if p.cred != nil {
		if err := os.Chown(p.socketDir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("devstack: give %s to %s: %w", p.socketDir, postgresUser, err)
		}
	}
	return nil
}

// command is bin/name as the server's account, with a minimal environment.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "TZ=UTC"}
	cmd.Dir = p.Dir
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	return cmd
}

// initdb creates the cluster unless Dir holds one.
func (p *Postgres) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(p.Dir, "PG_VERSION")); err == nil {
		return nil
	}
	cmd := p.command("initdb", "-D", p.Dir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
	out := &tailWriter{logger: p.logger, max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	exited, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("devstack: initdb: %w", err)
	}
	select {
	case err = <-exited:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("devstack: initdb %s: %w; its output: %s", p.Dir, err, out.String())
	}
	return nil
}

func (p *Postgres) startLocked(ctx context.Context) error {
	args := []string{"-D", p.Dir, "-k", p.socketDir}
	for _, s := range postgresSettings {
		args = append(args, "-c", s)
	}
	if p.throwaway {
		// Every index FerretDB creates is flushed at once otherwise: a test that makes a
		// database per case waits on the disk.
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off")
	}
	cmd := p.command("postgres", args...)
	out := &tailWriter{logger: p.logger, max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	exited, err := proc.Start(cmd)
	if err != nil {
		return fmt.Errorf("devstack: start postgres: %w", err)
	}
	p.cmd, p.exited = cmd, exited
	if err := p.waitReady(ctx); err != nil {
		_ = p.stopLocked()
		return fmt.Errorf("%w; postgres output: %s", err, out.String())
	}
	p.logger.Debug("postgres ready", "dir", p.Dir, "pid", cmd.Process.Pid)
	return nil
}

func (p *Postgres) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, p.URL("postgres"))
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-p.exited:
			ch := make(chan error, 1)
			ch <- werr
			p.exited = ch
			return fmt.Errorf("devstack: postgres exited during startup: %v", werr)
		case <-ctx.Done():
			return fmt.Errorf("devstack: postgres in %s not accepting connections: %w (last: %v)", p.Dir, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// URL is a connection URL for database db over the server's socket.
func (p *Postgres) URL(db string) string {
	return "postgres://postgres@/" + db + "?host=" + p.socketDir + "&sslmode=disable"
}

// Exec runs SQL statements on database db, one connection, in order.
func (p *Postgres) Exec(ctx context.Context, db string, statements ...string) error {
	conn, err := pgx.Connect(ctx, p.URL(db))
	if err != nil {
		return fmt.Errorf("devstack: connect to postgres database %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("devstack: postgres %s: %s: %w", db, strings.SplitN(strings.TrimSpace(s), "\n", 2)[0], err)
		}
	}
	return nil
}

// Pid is the postmaster's process id, 0 when stopped.
func (p *Postgres) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop shuts the server down (fast: SIGINT, open sessions are ended), SIGKILL after 20 s.
// Idempotent.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopLocked()
}

func (p *Postgres) stopLocked() error {
	if p.cmd == nil {
		return nil
	}
	cmd, exited := p.cmd, p.exited
	p.cmd, p.exited = nil, nil
	return proc.Stop(cmd, exited, syscall.SIGINT, 20*time.Second, "postgres")
}

// Restart stops and starts the server again on the same cluster and socket.
func (p *Postgres) Restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("devstack: postgres is closed")
	}
	if err := p.stopLocked(); err != nil {
		return err
	}
	return p.startLocked(ctx)
}

// Close stops the server for good and removes its socket directory; idempotent.
func (p *Postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	err := p.stopLocked()
	if p.tempSocketDir {
		err = errors.Join(err, os.RemoveAll(p.socketDir))
		p.tempSocketDir = false
	}
	return err
}
