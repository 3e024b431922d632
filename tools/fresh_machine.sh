#!/usr/bin/env bash
# The bare-system check: does the README's first command work on a Debian 12 machine that has
# never seen the project? A green CI on a developer's machine cannot tell, because whatever
# an earlier session installed by hand is still there; this script starts from nothing.
#
#   tools/fresh_machine.sh [--mode run|test] [--rev REV] [--keep]
#
#   1. base     a minimal Debian 12 root (`debootstrap --variant=minbase bookworm`, from the
#               mirror in this machine's own apt sources). Its only packages are Debian's
#               essential ones: no compiler, no cmake, no Python. The root is cached as a
#               tarball in $FRESH_CACHE (default /var/tmp/foldcheck-fresh) and unpacked anew on
#               every run, so every package the project needs is installed into it from nothing.
#   2. clone    `git clone` of this repository at REV (default HEAD: what is committed, not the
#               working tree) into the root.
#   3. run      `tools/bootstrap.sh MODE` inside (default run; chroot with /proc, /sys and /dev
#               mounted, unmounted on every exit path), with an empty environment but PATH,
#               HOME, the host's network settings (proxy variables, its CA bundle for pip,
#               its pip configuration and the local package indexes it names, read-only)
#               the compile cache (ccache's directory, $CCACHE_DIR or ~/.cache/ccache, shared:
#               a hit needs the same compiler and headers, installed in the root from nothing)
#               and HARDENING, FUZZ_SECONDS, JOBS, WHEEL, FOLDCHECK_SLOW_TESTS and CTEST_EXCLUDE
#               where set. The log of the last run of each mode is kept in $FRESH_CACHE/last-MODE.log.
#               `--mode test` measures the README's second command on a bare machine (all
#               of it but this check itself: FRESH_MACHINE=0 inside).
#   4. check    the run exits 0 and, for run, ends with the TVM case's verdict, `verdict: EXPECTED`.
#
# Prints how long each phase took; exits 0 when the check passes, 1 when it fails, 2 on a
# usage error or a machine that cannot run it (not root, no debootstrap). --keep leaves the
# root (its path is printed) for a look; --rev e0bdd85 checks an older commit.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
rev=HEAD
mode=run
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rev|--mode)
      [ $# -ge 2 ] || { echo "fresh_machine: $1 needs a value; usage: tools/fresh_machine.sh [--mode run|test] [--rev REV] [--keep]" >&2; exit 2; }
      if [ "$1" = --rev ]; then rev="$2"; else mode="$2"; fi
      shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: tools/fresh_machine.sh [--mode run|test] [--rev REV] [--keep]" >&2; exit 2 ;;
  esac
done
case "$mode" in run|test) ;; *) echo "fresh_machine: --mode run|test, not '$mode'" >&2; exit 2 ;; esac
commit="$(git -C "$repo" rev-parse --verify -q "$rev^{commit}")" ||
  { echo "fresh_machine: '$rev' is not a commit of $repo" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh_machine: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }

cache="${FRESH_CACHE:-/var/tmp/foldcheck-fresh}"
suite=bookworm
arch="$(dpkg --print-architecture)"
mkdir -p "$cache"
# Each run has a root of its own, so two runs (a developer's and CI's) never share mounts or
# files; the tarball is made under a lock.
root="$(mktemp -d "$cache/root.XXXXXX")"
log="$root.$mode.log"  # kept as $cache/last-$mode.log when the run ends
# A run holds a lock on its root while it lives. A run killed outright (SIGKILL, a CI
# timeout) cannot clean up: its root keeps its mounts and gigabytes. Every run first removes
# such roots, those whose lock it can take (a root of an older version has no lock file: the
# same), older than a minute (a run that has just made its root takes its lock at once) and
# not kept on purpose (--keep writes root.XXXXXX.kept).
exec 9>"$root.lock"
flock 9
sweep_left_roots() {
  local r m
  for r in "$cache"/root.??????; do
    [ -d "$r" ] && [ "$r" != "$root" ] && [ ! -e "$r.kept" ] || continue
    [ $(( $(date +%s) - $(stat -c %Y "$r") )) -gt 60 ] || continue
    exec 8>>"$r.lock"
    if flock -n 8; then
      awk -v r="$r/" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
      done
      echo "fresh_machine: removing $r, left by a run that was killed" >&2
      rm -rf --one-file-system "$r" "$r".*.log
      rm -f "$r.lock"
    fi
    exec 8>&-
  done
}
sweep_left_roots

# This machine's Debian apt sources: deb822 files signed by Debian's archive keyring, and
# one-line files with Debian's archives (third-party repositories are left out: their keys
# are not in the root).
debian_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -qE 'debian-archive-keyring|deb\.debian\.org' "$f" && echo "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && grep -qE '^deb .*(debian\.org|/debian)' "$f" && echo "$f"
  done
  return 0
}
# The first Debian archive of those sources, security archives aside (debootstrap's mirror).
host_mirror() {
  local files uri
  files="$(debian_sources)"
  [ -n "$files" ] && uri="$(cat $files | awk '/^URIs:/ {print $2} $1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' |
                            grep -v security | head -n 1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

# Unmount whatever is mounted below the root, deepest first (the /dev bind is a slave, so
# this never reaches the host's /dev/pts or /dev/shm); remove the root unless --keep.
cleanup() {
  local m
  awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  if [ "$keep" = 0 ] && [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
  if [ "$keep" = 1 ]; then touch "$root.kept"; echo "fresh_machine: the root is kept in $root" >&2; fi
  rm -f "$root.lock"
  if [ -f "$log" ]; then mv -f "$log" "$cache/last-$mode.log"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

phase_start=$(date +%s)
phase() {  # phase NAME: print the time since the previous phase ended
  local now; now=$(date +%s)
  printf 'fresh_machine: %-6s %4d s\n' "$1" $((now - phase_start))
  phase_start=$now
}

t_all=$(date +%s)
mirror="$(host_mirror)"
tarball="$cache/$suite-minbase-$arch.tar"
exec 9>"$cache/tarball.lock"
flock 9
if [ ! -s "$tarball" ]; then
  echo "fresh_machine: debootstrap --variant=minbase $suite from $mirror (cached in $tarball)"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  rm -rf "$root/var/cache/apt/archives/"*.deb
  tar -C "$root" -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
else
  tar -C "$root" -xf "$tarball"
fi
flock -u 9
# The host's Debian sources (the same archives and snapshot as this machine) replace
# debootstrap's one-line sources.list; and the host's resolver.
sources="$(debian_sources)"
if [ -n "$sources" ]; then
  : >"$root/etc/apt/sources.list"
  for f in $sources; do cp "$f" "$root/etc/apt/sources.list.d/"; done
  [ -f "$root/etc/apt/sources.list.d/sources.list" ] && mv "$root/etc/apt/sources.list.d/sources.list" "$root/etc/apt/sources.list"
fi
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The host's trust in TLS certificates, for pip inside (apt uses the mirror as the host does):
# where the host reaches PyPI through a proxy with its own certificate authority, the root
# must trust it too. A file outside the root's packages, named by PIP_CERT and SSL_CERT_FILE
# inside; nothing of the root's own is changed.
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
ca_env=()
if [ -s "$host_ca" ]; then
  cp -L "$host_ca" "$root/etc/host-ca-certificates.crt"
  ca_env=(PIP_CERT=/etc/host-ca-certificates.crt SSL_CERT_FILE=/etc/host-ca-certificates.crt)
fi
# The host's Python package index configuration: pip's configuration files (/etc, /etc/xdg, the
# user's), its PIP_* environment and the local package indexes they name (a machine of this
# project's kind keeps PyPI releases it offers on its own disk, under /opt). The root gets the
# same files (the user's as root's), the same PIP_* variables and read-only views of those
# directories, so pip inside resolves what pip outside does (torch from the disk, not a
# multi-GB download). Nothing is installed from them by this script.
pip_dirs=()
pip_files=()
for f in /etc/pip.conf /etc/xdg/pip/pip.conf /etc/xdg/pip/constraints.txt "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
  [ -f "$f" ] || continue
  inside="${f/#$HOME//root}"
  mkdir -p "$root$(dirname "$inside")"
  cp -L "$f" "$root$inside"
  pip_files+=("$f")
done
for d in $( { cat "${pip_files[@]}" /dev/null; env | grep '^PIP_' || true; } | grep -oE '/opt/[A-Za-z0-9._/-]+' || true); do
  d="${d%/}"; d="${d%/simple}"
  [ -d "$d" ] && pip_dirs+=("$d")
done
phase base

git clone -q --no-hardlinks "$repo" "$root/root/foldcheck"
git -C "$root/root/foldcheck" checkout -q "$commit"
echo "fresh_machine: cloned $(git -C "$root/root/foldcheck" log -1 --format='%h %s' | cut -c1-80)"
phase clone

mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
for d in $(printf '%s\n' "${pip_dirs[@]}" | sort -u); do
  mkdir -p "$root$d"
  mount --bind "$d" "$root$d"
  mount -o remount,bind,ro "$root$d"
done
# The compile cache (ccache, which tools/bootstrap.sh routes every compile through), shared
# read-write: the root installs its own compilers and headers from nothing, and ccache reuses
# an object only when those hash the same as the ones it was compiled with (a missing package
# fails the compile as it would without the cache; linking is never cached).
ccache_dir="${CCACHE_DIR:-$HOME/.cache/ccache}"
mkdir -p "$ccache_dir" "$root/var/cache/ccache"
mount --bind "$ccache_dir" "$root/var/cache/ccache"
passed_env=(CCACHE_DIR=/var/cache/ccache)
for v in CCACHE_DISABLE CCACHE_MAXSIZE HARDENING FUZZ_SECONDS JOBS WHEEL FOLDCHECK_SLOW_TESTS CTEST_EXCLUDE http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
         $(env | grep -oE '^PIP_[A-Z_]+' | grep -vE '^PIP_(CERT)$' || true); do
  if [ -n "${!v:-}" ]; then passed_env+=("$v=${!v}"); fi
done
status=0
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 FRESH_MACHINE=0 "${ca_env[@]}" "${passed_env[@]}" \
  /bin/bash -c "cd /root/foldcheck && tools/bootstrap.sh $mode" >"$log" 2>&1 || status=$?
grep '^bootstrap:' "$log" | sed 's/^/  /' || true
phase "$mode"

# `run` must end with the TVM case's verdict; `test` is judged by its exit status alone.
verdict=""
[ "$mode" = run ] && verdict="$(grep -E '^verdict: ' "$log" | tail -n 1 || true)"
expected=1
case "$verdict" in "verdict: EXPECTED" | "verdict: EXPECTED "*) ;; *) expected=0 ;; esac
if [ "$status" -ne 0 ] || { [ "$mode" = run ] && [ "$expected" = 0 ]; }; then
  echo "fresh_machine: FAILED: tools/bootstrap.sh $mode exited $status${verdict:+, $verdict}; its log's end ($cache/last-$mode.log):" >&2
  tail -n 25 "$log" >&2
  exit 1
fi
phase check
echo "fresh_machine: passed (tools/bootstrap.sh $mode${verdict:+, ${verdict%% —*}}) in $(( $(date +%s) - t_all )) s; log in $cache/last-$mode.log"
