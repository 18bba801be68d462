#!/usr/bin/env bash
# System set-up for evlab: Debian packages, kernel-header links for BCC, tracefs.
# Idempotent and quiet when everything is in place. Without root it only reports
# what is missing (evlab then degrades; `evlab doctor` says how to fix it).
set -euo pipefail

PKGS=(gcc make libssl-dev strace tmux iproute2 tcpdump tshark bpftrace
      bpfcc-tools python3-bpfcc libbpfcc linux-headers-amd64 bubblewrap util-linux
      chromium fonts-dejavu-core    # the HTML report's browser test and screenshots (Playwright)
      nginx rsync                   # the fetch task's web server; the mirror task's real client
      logrotate                     # the rotate task's real client (tests/test_rotate.py)
      curl wget                     # the fetch task's real clients
      openjdk-17-jdk-headless tcl)  # outsiders' clients in the tests: a JVM's, Tcl's
# The tests grade an honest Node.js client: Debian's nodejs unless a node is already there.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)

say() { echo "setup: $*" >&2; }

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "$(id -u)" -ne 0 ]; then
  [ ${#missing[@]} -eq 0 ] || say "not root: cannot install ${missing[*]} (evlab will degrade; see 'evlab doctor')"
  exit 0
fi

if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture; answer for it.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts nginx's service on :80 when it installs it (unless a policy-rc.d forbids
  # it); evlab runs its own nginx in each lab, so the system's is stopped and left disabled
  if [[ " ${missing[*]} " == *" nginx "* ]]; then
    { systemctl disable --now nginx || { service nginx stop && update-rc.d nginx disable; }
    } >/dev/null 2>&1 || true
    say "left Debian's nginx service stopped (evlab runs nginx per lab)"
  fi
fi

# The unprivileged user graded clients run as, inside the sandbox (probes/boundary/sandbox.py).
if ! id evlab-client >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin evlab-client
  say "created the sandbox user evlab-client"
fi

# BCC looks for headers under /lib/modules/$(uname -r); this kernel ships none, so point
# build/ at Debian's -amd64 header tree and source/ at the matching -common tree.
mods="/lib/modules/$(uname -r)"
if [ ! -e "$mods/build/include" ]; then
  amd64=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$amd64" ]; then
    common="${amd64%-amd64}-common"
    mkdir -p "$mods"
    ln -sfn "$amd64" "$mods/build"
    ln -sfn "$common" "$mods/source"
    say "linked kernel headers $amd64 -> $mods/build"
  else
    say "no Debian kernel headers found under /usr/src; BCC will not compile"
  fi
fi

# BCC's TRACEPOINT_PROBE needs tracefs; a fresh boot here does not mount it.
if ! mountpoint -q /sys/kernel/tracing; then
  mount -t tracefs nodev /sys/kernel/tracing && say "mounted tracefs"
fi
