#!/usr/bin/env bash
# node.sh: ensure what a local Kubernetes node needs is on this machine, then print the
# directory of its binaries. Later calls return at once. Concurrent callers wait on a lock.
#
# - Debian packages (installed with apt-get when missing, which needs root): containerd
#   (1.6), runc, the CNI plugins, iptables and conntrack.
# - kubelet and kube-proxy, built at a pinned version from the Go module proxy into a cache
#   directory outside the repository, as scripts/controlplane.sh builds the control plane.
#   Kubernetes 1.36 and later need containerd 2.x; v1.35 is the newest release that still
#   runs on containerd 1.6 and cgroup v1 (failCgroupV1: false), two minors behind the
#   control plane's API server (v1.37), within the supported skew of three.
# - kube-scheduler at the control plane's version: a node needs Pods scheduled, which the
#   control plane alone (scripts/controlplane.sh) does not do.
# - pause: the sandbox's process, built from hack/pause (a static Go binary), so that no
#   image is ever pulled.
#
#   NODE_K8S_VERSION          kubelet and kube-proxy release (k8s.io/kubernetes), default v1.35.4
#   K8S_VERSION_CONTROLPLANE  kube-scheduler release, default v1.37.1 (scripts/controlplane.sh's)
set -euo pipefail

K8S_VERSION=${NODE_K8S_VERSION:-v1.35.4}
SCHEDULER_VERSION=${K8S_VERSION_CONTROLPLANE:-v1.37.1}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/liqo-auth/node
dir=$cache_root/${K8S_VERSION}-scheduler-${SCHEDULER_VERSION}
binaries=(kubelet kube-proxy kube-scheduler pause)
packages=(containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux)
commands=(containerd ctr containerd-shim-runc-v2 runc iptables iptables-restore conntrack ip nsenter)
repo=$(cd "$(dirname "$0")/.." && pwd)

log() { echo "node: $*" >&2; }

have_commands() {
  for c in "${commands[@]}"; do PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null || return 1; done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ]
}

ready() {
  have_commands || return 1
  [ -f "$dir/.complete" ] || return 1
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
  # pause is built from this repository: rebuild it when its source changed.
  [ "$(cat "$dir/.pause-source" 2>/dev/null)" = "$(pause_source)" ]
}

pause_source() { sha256sum "$repo/hack/pause/main.go" | cut -d' ' -f1; }

if ready; then echo "$dir"; exit 0; fi

command -v go >/dev/null || { log "go is not installed: install Go 1.26 and retry"; exit 1; }
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if ready; then echo "$dir"; exit 0; fi
start=$(date +%s)

if ! have_commands; then
  [ "$(id -u)" = 0 ] || { log "a node needs ${packages[*]} (Debian packages) and root: run as root, or install them"; exit 1; }
  command -v apt-get >/dev/null || { log "a node needs ${packages[*]}: no apt-get here, install them"; exit 1; }
  log "installing ${packages[*]} with apt-get (first time only)"
  export DEBIAN_FRONTEND=noninteractive
  # Where systemd runs, the package also starts the machine's own containerd: the node
  # runs its own beside it (its own socket, root and state directories).
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
  have_commands || { log "the packages installed, but ${commands[*]} or the CNI plugins in /usr/lib/cni are still missing"; exit 1; }
fi

# build_k8s VERSION OUT BINARY...: build k8s.io/kubernetes/cmd/BINARY at VERSION into OUT.
# k8s.io/kubernetes replaces every staging module with ./staging/..., which a dependent
# module cannot use; point each at its published v0.x release.
build_k8s() {
  local version=$1 out=$2; shift 2
  local staging_version=v0.${version#v1.} major minor ldflags mod
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mod=$(mktemp -d "$work/mod.XXXXXX")
  ( cd "$mod"
    export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
    go mod init liqo-auth.local/node >/dev/null 2>&1
    modfile=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [ -n "$modfile" ] || { log "cannot download k8s.io/kubernetes@$version from the module proxy"; exit 1; }
    staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$modfile")
    [ -n "$staging" ] || { log "no staging modules found in $modfile"; exit 1; }
    for m in $staging; do go mod edit -replace "$m=$m@$staging_version"; done
    go mod edit -require "k8s.io/kubernetes@$version"
    go mod download
    for b in "$@"; do
      log "building $b $version"
      go build -trimpath -ldflags "$ldflags" -o "$out/$b" "k8s.io/kubernetes/cmd/$b"
    done )
}

if [ ! -f "$dir/.complete" ] || [ ! -x "$dir/kubelet" ] || [ ! -x "$dir/kube-proxy" ] || [ ! -x "$dir/kube-scheduler" ]; then
  work=$(mktemp -d "$cache_root/.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "building kubelet and kube-proxy $K8S_VERSION, kube-scheduler $SCHEDULER_VERSION from the Go module proxy (first time only, about 4 minutes on 2 cores)"
  mkdir -p "$work/out"
  build_k8s "$K8S_VERSION" "$work/out" kubelet kube-proxy
  build_k8s "$SCHEDULER_VERSION" "$work/out" kube-scheduler
  "$work/out/kubelet" --version >&2
  mkdir -p "$dir"
  for b in kubelet kube-proxy kube-scheduler; do mv -f "$work/out/$b" "$dir/$b"; done
  date -u +%FT%TZ > "$dir/.complete"
fi

log "building pause (hack/pause)"
mkdir -p "$dir"
( cd "$repo" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "$dir/pause.new" ./hack/pause )
mv -f "$dir/pause.new" "$dir/pause"
pause_source > "$dir/.pause-source"
log "ready in $(( $(date +%s) - start ))s in $dir"
echo "$dir"
