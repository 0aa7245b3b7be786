package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/analyticsco/platform/devstack/platform"
)

// nginxConf is a reverse proxy with upstream keepalive. keepalive_requests is
// raised on both sides because the Go servers it is compared with never close an
// idle keep-alive connection after N requests (nginx's default is 1000).
const nginxConf = `worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/client_body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  keepalive_requests 1000000;
  upstream backend {
    server %[2]s;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen %[3]s;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`

// Nginx is Debian's nginx (installed when missing and running as root) with 2
// workers in front of the backend. Its CPU is the sum over master and workers.
func (e *Env) Nginx(ctx context.Context) (backend, error) {
	return memo(e, "nginx", func() (backend, error) {
		bin, err := findNginx()
		if err != nil {
			return backend{}, err
		}
		be, err := e.Backend(ctx)
		if err != nil {
			return backend{}, err
		}
		dir := filepath.Join(e.Dir, "nginx")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return backend{}, err
		}
		addr, err := freeAddr()
		if err != nil {
			return backend{}, err
		}
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, be.URL[len("http://"):], addr), 0o644); err != nil {
			return backend{}, err
		}
		// -e: the startup error log, before the config is read, must not go to /var/log.
		c, err := e.start(platform.Proc{Name: "nginx", Binary: bin, Args: []string{"-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off;"},
			Addr: addr, InternalAddr: addr, ReadyPath: "/", Env: childEnv()})
		if err != nil {
			return backend{}, err
		}
		u := "http://" + addr
		if err := waitReady(ctx, c); err != nil {
			raw, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			return backend{}, fmt.Errorf("%w\nnginx error.log:\n%s", err, raw)
		}
		master := c.Pid()
		return backend{URL: u, Proc: &Proc{Label: "nginx (master+2 workers)", PIDs: func() []int {
			return append([]int{master}, childrenOf(master)...)
		}}}, nil
	})
}

// findNginx returns the nginx binary, installing Debian's package when it is
// missing and the bench runs as root; otherwise the row is skipped.
func findNginx() (string, error) { return findPackaged("nginx", "nginx") }

// findPackaged returns the binary bin of Debian's package pkg (on PATH or in
// /usr/sbin), installing the package when it is missing and the bench runs as root;
// otherwise the row is skipped.
func findPackaged(bin, pkg string) (string, error) {
	look := func() (string, bool) {
		if p, err := exec.LookPath(bin); err == nil {
			return p, true
		}
		if _, err := os.Stat("/usr/sbin/" + bin); err == nil {
			return "/usr/sbin/" + bin, true
		}
		return "", false
	}
	if p, ok := look(); ok {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", ErrSkip{fmt.Sprintf("%s not installed and not root: `sudo apt-get install -y %s` to include it", bin, pkg)}
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", ErrSkip{bin + " not installed and no apt-get to install it"}
	}
	logf("installing %s (Debian package)", pkg)
	install := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "-qq", pkg)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := install(); err != nil {
		// A fresh image has no package lists yet.
		upd := exec.Command("apt-get", "update", "-qq")
		upd.Stdout, upd.Stderr = os.Stderr, os.Stderr
		_ = upd.Run()
		if err := install(); err != nil {
			return "", ErrSkip{fmt.Sprintf("apt-get install %s failed: %v", pkg, err)}
		}
	}
	if p, ok := look(); ok {
		return p, nil
	}
	return "", ErrSkip{bin + " installed but not found on PATH or in /usr/sbin"}
}
