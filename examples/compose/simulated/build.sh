#!/usr/bin/env bash
# Builds the simulated stack's images locally, without a registry: the n8ncap binary and the
# shared libraries `ldd` lists (glibc includes the resolver, so service names resolve) in scratch
# images — n8n (entrypoint `n8ncap sim n8n`), runners (`n8ncap sim runner`) — redis-server from
# this machine (apt-get install redis-server) the same way, and PostgreSQL's server from this
# machine (apt-get install postgresql) with a cluster made here, for `postgres.yml`.
#
# Usage: examples/compose/simulated/build.sh [N8NCAP_BINARY]
#        (default: target/release/n8ncap, built if missing; TAG=local)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="${1:-$root/target/release/n8ncap}"
tag="${TAG:-local}"
if [ ! -x "$bin" ]; then
  (cd "$root" && cargo build --release --bin n8ncap)
fi
redis="$(command -v redis-server || true)"
[ -n "$redis" ] || { echo "redis-server not found: apt-get install redis-server" >&2; exit 1; }
# The simulated stack's database password (postgres.yml says the same): not a secret.
PG_PASSWORD=simulated-stack-not-a-secret
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

# Copies a binary and the libraries it loads into $ctx/$2/rootfs.
stage() {
  local exe=$1 dest=$ctx/$2/rootfs target=$3
  mkdir -p "$dest$(dirname "$target")"
  cp "$exe" "$dest$target"
  # A module that loads no library of its own lists none.
  { ldd "$exe" | grep -o '/[^ ]*' || true; } | while read -r lib; do
    mkdir -p "$dest$(dirname "$lib")"
    cp -L "$lib" "$dest$lib"
  done
}
# PostgreSQL's newest server here, the modules it loads and their libraries, its share files and
# the time zones, at the paths Debian gives them (the server finds its share files relative to
# itself), with /usr/lib/postgresql/current naming the version. The cluster is made by initdb as
# the `postgres` user (initdb refuses root) in a directory that user owns: the superuser postgres
# and the role n8n with the password below, the database n8n owned by n8n, TCP on every address
# with passwords (scram-sha-256), no Unix socket.
postgres_context() {
  local bin lib version dest=$ctx/postgres/rootfs cluster
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$bin" ] || { echo "PostgreSQL not found: apt-get install postgresql" >&2; exit 1; }
  lib="$(dirname "$bin")/lib"
  version="$(basename "$(dirname "$bin")")"
  stage "$bin/postgres" postgres "$bin/postgres"
  # Every module but the JIT's (it would bring LLVM, 100 MB; jit is off).
  for so in "$lib"/*.so; do
    case "$so" in */llvmjit*) continue ;; esac
    stage "$so" postgres "$so"
  done
  ln -s "$version" "$dest/usr/lib/postgresql/current"
  mkdir -p "$dest/usr/share/postgresql" "$dest/etc"
  cp -r "/usr/share/postgresql/$version" "$dest/usr/share/postgresql/$version"
  cp -r /usr/share/zoneinfo "$dest/usr/share/zoneinfo"
  printf 'postgres:x:70:70:PostgreSQL:/var/lib/postgresql:/nonexistent\n' >"$dest/etc/passwd"
  printf 'postgres:x:70:\n' >"$dest/etc/group"
  cluster=$(mktemp -d)
  chown postgres "$cluster"
  printf '%s\n' "$PG_PASSWORD" >"$cluster/pw"
  chown postgres "$cluster/pw"
  runuser -u postgres -- "$bin/initdb" -D "$cluster/data" -U postgres --pwfile="$cluster/pw" \
    --auth-local=trust --auth-host=scram-sha-256 --no-locale -E UTF8 >/dev/null
  printf "CREATE ROLE n8n LOGIN PASSWORD '%s';\nCREATE DATABASE n8n OWNER n8n;\n" "$PG_PASSWORD" |
    runuser -u postgres -- "$bin/postgres" --single -D "$cluster/data" postgres \
      >/dev/null 2>"$cluster/single.log" || { cat "$cluster/single.log" >&2; exit 1; }
  printf "listen_addresses = '*'\nunix_socket_directories = ''\njit = off\n" \
    >>"$cluster/data/postgresql.conf"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$cluster/data/pg_hba.conf"
  rm "$cluster/pw"
  mkdir -p "$ctx/postgres/cluster"
  cp -a "$cluster/data" "$ctx/postgres/cluster/data"
  rm -rf "$cluster"
}
stage "$bin" sim /n8ncap
stage "$redis" redis /usr/bin/redis-server
cp "$here/Dockerfile" "$ctx/sim/Dockerfile"
cp "$here/Dockerfile.redis" "$ctx/redis/Dockerfile"
postgres_context
cp "$here/Dockerfile.postgres" "$ctx/postgres/Dockerfile"
# Without buildx, docker prints its legacy-builder deprecation on every build: said once here.
legacy=""
build() {
  if ! docker build -q "$@" >/dev/null 2>"$ctx/build.err"; then
    cat "$ctx/build.err" >&2
    exit 1
  fi
  if grep -q "DEPRECATED" "$ctx/build.err"; then legacy=1; fi
}
# The images these tags named before: a rebuild leaves them untagged (`<none>`), so they are
# removed below unless a container still uses them.
images="n8ncap-sim/n8n:$tag n8ncap-sim/runners:$tag n8ncap-sim/redis:$tag n8ncap-sim/postgres:$tag"
before=""
for i in $images; do before="$before $(docker image inspect -f '{{.Id}}' "$i" 2>/dev/null || true)"; done
build --target n8n -t "n8ncap-sim/n8n:$tag" "$ctx/sim"
build --target runners -t "n8ncap-sim/runners:$tag" "$ctx/sim"
build -t "n8ncap-sim/redis:$tag" "$ctx/redis"
build -t "n8ncap-sim/postgres:$tag" "$ctx/postgres"
after=""
for i in $images; do after="$after $(docker image inspect -f '{{.Id}}' "$i")"; done
for id in $before; do
  case " $after " in *" $id "*) ;; *) docker rmi "$id" >/dev/null 2>&1 || true ;; esac
done
if [ -n "$legacy" ]; then
  echo "note: docker built with its legacy builder (buildx is not installed); the images are the same" >&2
fi
echo "built n8ncap-sim/n8n:$tag, n8ncap-sim/runners:$tag, n8ncap-sim/redis:$tag, n8ncap-sim/postgres:$tag"
