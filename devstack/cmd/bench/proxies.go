package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/analyticsco/platform/devstack/platform"
)

// The other reverse proxies of the gateway table, each with keep-alive to the backend
// as nginx has (a pool of up to 64 idle connections) and no access log: Debian's Caddy
// (a Go reverse proxy: net/http's server and Transport) and Debian's HAProxy (C, event
// loop, two threads like nginx's two workers).

// caddyfile proxies to the backend with a keep-alive pool like nginx's.
const caddyfile = `{
	admin off
	auto_https off
}
http://%[2]s {
	reverse_proxy %[1]s {
		transport http {
			keepalive 2m
			keepalive_idle_conns 64
			keepalive_idle_conns_per_host 64
		}
	}
}
`

// Caddy is Debian's caddy (installed when missing and running as root) in front of the
// backend.
func (e *Env) Caddy(ctx context.Context) (backend, error) {
	return memo(e, "caddy", func() (backend, error) {
		bin, err := findPackaged("caddy", "caddy")
		if err != nil {
			return backend{}, err
		}
		return e.startProxy(ctx, "caddy", func(dir, upstream, addr string) (platform.Proc, error) {
			conf := filepath.Join(dir, "Caddyfile")
			if err := os.WriteFile(conf, fmt.Appendf(nil, caddyfile, upstream, addr), 0o644); err != nil {
				return platform.Proc{}, err
			}
			// Caddy writes its state under $HOME and the XDG directories: the temp dir's.
			return platform.Proc{Binary: bin, Args: []string{"run", "--config", conf, "--adapter", "caddyfile"},
				Env: childEnv("HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)}, nil
		})
	})
}

// haproxyConf proxies to the backend with idle connections kept for reuse (a pool of up
// to 64, like nginx's keepalive 64).
const haproxyConf = `global
	nbthread 2
	maxconn 4096
defaults
	mode http
	option http-keep-alive
	http-reuse always
	timeout connect 5s
	timeout client 2m
	timeout server 2m
frontend bench
	bind %[3]s
	default_backend backend
backend backend
	server backend %[2]s pool-max-conn 64 pool-purge-delay 2m
`

// HAProxy is Debian's haproxy (installed when missing and running as root) in front of
// the backend, two threads.
func (e *Env) HAProxy(ctx context.Context) (backend, error) {
	return memo(e, "haproxy", func() (backend, error) {
		bin, err := findPackaged("haproxy", "haproxy")
		if err != nil {
			return backend{}, err
		}
		return e.startProxy(ctx, "haproxy", func(dir, upstream, addr string) (platform.Proc, error) {
			conf := filepath.Join(dir, "haproxy.cfg")
			if err := os.WriteFile(conf, fmt.Appendf(nil, haproxyConf, dir, upstream, addr), 0o644); err != nil {
				return platform.Proc{}, err
			}
			// -db: in the foreground
			return platform.Proc{Binary: bin, Args: []string{"-db", "-f", conf}, Env: childEnv()}, nil
		})
	})
}

// startProxy starts a reverse proxy in front of the backend on a free port, from the
// command command builds (given its own dir, the backend's host:port and its address).
func (e *Env) startProxy(ctx context.Context, name string, command func(dir, upstream, addr string) (platform.Proc, error)) (backend, error) {
	be, err := e.Backend(ctx)
	if err != nil {
		return backend{}, err
	}
	dir := filepath.Join(e.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return backend{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return backend{}, err
	}
	p, err := command(dir, be.URL[len("http://"):], addr)
	if err != nil {
		return backend{}, err
	}
	p.Name, p.Addr, p.InternalAddr, p.ReadyPath = name, addr, addr, "/"
	c, err := e.start(p)
	if err != nil {
		return backend{}, err
	}
	if err := waitReady(ctx, c); err != nil {
		return backend{}, err
	}
	return backend{URL: "http://" + addr, Proc: singleProc(name, c.Pid())}, nil
}
