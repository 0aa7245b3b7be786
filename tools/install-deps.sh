#!/usr/bin/env bash
# install-deps.sh installs the Debian packages that the stack and its tests run, named by
# what they are for:
#
#   tools/install-deps.sh redis postgres node openssl prometheus nginx chromium cli
#
# Each name is checked with command -v first: only what is missing is installed. As root on
# a machine with apt-get it installs the missing packages; otherwise it names them, with
# the command that installs them, and fails. make's ensure-* targets and .ci/run call it.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

packages=()  # the Debian packages to install
notes=()     # what is missing, one line per name
postgres=false

for name in "$@"; do
	case $name in
	redis)
		# redis-server is a child process of the stack and of every suite; the Sentinel and
		# Cluster modes' tests and the Redis failover suite also run redis-sentinel and
		# redis-cli (redis-tools, a dependency). With REDIS_URL set, redis-server may be absent.
		if [ -z "${REDIS_URL:-}" ] && ! have redis-server || ! have redis-sentinel; then
			packages+=(redis-server redis-sentinel)
			notes+=("redis-server or redis-sentinel not found (or set REDIS_URL)")
		fi
		;;
	postgres)
		# The embedded MongoDB (FerretDB) of the stack and the tests keeps its data in a
		# PostgreSQL child process. The package's own cluster (main, a system service) is not
		# wanted, so it is not created.
		if ! have postgres && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
			packages+=(postgresql)
			notes+=("PostgreSQL not found")
			postgres=true
		fi
		;;
	node)
		# Cube's schema compiler checks the dbt converter's output, and Prism, Redocly,
		# openapi-typescript and the browser test check the API document; they run on Node.
		if ! have node || ! have npm; then
			packages+=(nodejs npm)
			notes+=("node or npm not found")
		fi
		;;
	openssl)
		# deploy/gen-env.sh (checked by the deploy test) derives keys with openssl.
		if ! have openssl; then
			packages+=(openssl)
			notes+=("openssl not found")
		fi
		;;
	prometheus)
		# promtool checks and unit-tests the alerting and recording rules and the dashboards'
		# queries; make run OBS=1 runs prometheus.
		if ! have prometheus || ! have promtool; then
			packages+=(prometheus)
			notes+=("prometheus/promtool not found")
		fi
		;;
	nginx)
		# The gateway's differential framing test sends the same requests through nginx.
		if ! have nginx && [ ! -x /usr/sbin/nginx ]; then
			packages+=(nginx)
			notes+=("nginx not found")
		fi
		;;
	chromium)
		# A test opens the API reference (/api/v1/docs) in chromium, headless.
		if ! have chromium; then
			packages+=(chromium)
			notes+=("chromium not found")
		fi
		;;
	cli)
		# The README's quickstart, which a test runs, uses curl and jq.
		for c in curl jq; do
			if ! have "$c"; then
				packages+=("$c")
				notes+=("$c not found")
			fi
		done
		;;
	*)
		echo "install-deps.sh: unknown name $name (redis postgres node openssl prometheus nginx chromium cli)" >&2
		exit 2
		;;
	esac
done

[ ${#packages[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! have apt-get; then
	printf '%s\n' "${notes[@]}" >&2
	echo "install with 'sudo apt-get install -y ${packages[*]}'" >&2
	exit 1
fi

echo "installing ${packages[*]} (Debian packages)" >&2
if $postgres; then
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/devstack.conf
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >&2
