#!/usr/bin/env bash
# Builds the simulated stack's three images locally, without a registry: the n8ncap binary and
# the shared libraries `ldd` lists (glibc includes the resolver, so service names resolve) in
# scratch images — n8n (entrypoint `n8ncap sim n8n`), runners (`n8ncap sim runner`) — and
# redis-server from this machine (apt-get install redis-server) the same way.
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
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

# Copies a binary and the libraries it loads into $ctx/$2/rootfs.
stage() {
  local exe=$1 dest=$ctx/$2/rootfs target=$3
  mkdir -p "$dest$(dirname "$target")"
  cp "$exe" "$dest$target"
  ldd "$exe" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$dest$(dirname "$lib")"
    cp -L "$lib" "$dest$lib"
  done
}
stage "$bin" sim /n8ncap
stage "$redis" redis /usr/bin/redis-server
cp "$here/Dockerfile" "$ctx/sim/Dockerfile"
cp "$here/Dockerfile.redis" "$ctx/redis/Dockerfile"
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
images="n8ncap-sim/n8n:$tag n8ncap-sim/runners:$tag n8ncap-sim/redis:$tag"
before=""
for i in $images; do before="$before $(docker image inspect -f '{{.Id}}' "$i" 2>/dev/null || true)"; done
build --target n8n -t "n8ncap-sim/n8n:$tag" "$ctx/sim"
build --target runners -t "n8ncap-sim/runners:$tag" "$ctx/sim"
build -t "n8ncap-sim/redis:$tag" "$ctx/redis"
after=""
for i in $images; do after="$after $(docker image inspect -f '{{.Id}}' "$i")"; done
for id in $before; do
  case " $after " in *" $id "*) ;; *) docker rmi "$id" >/dev/null 2>&1 || true ;; esac
done
if [ -n "$legacy" ]; then
  echo "note: docker built with its legacy builder (buildx is not installed); the images are the same" >&2
fi
echo "built n8ncap-sim/n8n:$tag, n8ncap-sim/runners:$tag, n8ncap-sim/redis:$tag"
