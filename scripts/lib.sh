# Shared by scripts/demo, scripts/test and .ci/run: set-up that a fresh
# machine may lack. Source it; do not run it.

# Keep the cargo target directory outside the clone, so a fresh clone (CI)
# reuses RocksDB's C++ build from earlier runs on the same machine.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/affinity/target}"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# RocksDB's build (librocksdb-sys) needs clang and libclang for bindgen.
ensure_build_prereqs() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found; install the Rust toolchain (https://rustup.rs)" >&2
    return 1
  fi
  local missing=()
  command -v clang >/dev/null 2>&1 || missing+=(clang)
  # bindgen loads libclang.so or libclang-N.so (not libclang-cpp).
  if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
         /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so* >/dev/null 2>&1; then
    missing+=(libclang-dev)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing build prerequisites: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  else
    echo "error: please install ${missing[*]} (needed to build RocksDB)" >&2
    return 1
  fi
}

# Path of the official Cloud Bigtable emulator, or nothing.
find_cbtemulator() {
  if [ -n "${AFFINITY_CBTEMULATOR:-}" ] && [ -x "$AFFINITY_CBTEMULATOR" ]; then
    echo "$AFFINITY_CBTEMULATOR"; return
  fi
  command -v cbtemulator 2>/dev/null && return
  local p
  for p in /usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator \
           /usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  if command -v gcloud >/dev/null 2>&1; then
    p="$(gcloud info --format='value(installation.sdk_root)' 2>/dev/null)/platform/bigtable-emulator/cbtemulator"
    [ -x "$p" ] && { echo "$p"; return; }
  fi
}

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Wait until something listens on 127.0.0.1:$1 (at most ~20 s).
wait_for_port() {
  local i
  for i in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# The browser and client tests (crates/http/tests/browser.rs) need Debian's
# Chromium, Node.js, the npm packages of tests/browser (installed with
# `npm ci`, the registry's tarballs cached in ~/.cache/affinity/npm) and
# Algolia's Python client (tests/clients/requirements.txt, in a venv in
# ~/.cache/affinity/python). A failure here is a warning: the tests then
# report themselves skipped, or fail under CI=true.
ensure_browser_prereqs() {
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing browser test prerequisites: ${missing[*]}"
    $sudo apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null \
      || say "warning: could not install ${missing[*]}"
  fi
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/affinity/python"
  if command -v python3 >/dev/null 2>&1 \
     && { [ ! -f "$venv/requirements.txt" ] || ! cmp -s tests/clients/requirements.txt "$venv/requirements.txt"; }; then
    say "installing Algolia's Python client for the client tests"
    if python3 -m venv "$venv" && "$venv/bin/pip" install -q -r tests/clients/requirements.txt; then
      cp tests/clients/requirements.txt "$venv/requirements.txt"
    else
      say "warning: could not install tests/clients/requirements.txt"
    fi
  fi
  command -v npm >/dev/null 2>&1 || return 0
  local dir=tests/browser
  # Install in a fresh clone, and again when the lock changed since.
  if [ ! -f "$dir/node_modules/.package-lock.json" ] \
     || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    say "installing the browser tests' npm packages"
    local cache="${XDG_CACHE_HOME:-$HOME/.cache}/affinity/npm"
    (cd "$dir" && npm ci --cache "$cache" --prefer-offline --no-audit --no-fund --loglevel=error) \
      || say "warning: npm ci failed in $dir"
  fi
}

# A nextest filter leaving out the tests that the harnesses with
# prerequisites (tests/browser.rs, tests/disk_cli.rs) list as ignored
# because something they need is missing; empty when none is.
missing_prereq_filter() {
  cargo nextest list --release --workspace --run-ignored only --message-format json 2>/dev/null |
    python3 -c '
import json, sys
harnesses = ("affinity-http::browser", "affinity-cli::disk_cli")
suites = json.load(sys.stdin).get("rust-suites", {})
out = []
for binary in harnesses:
    cases = suites.get(binary, {}).get("testcases", {})
    for name, case in sorted(cases.items()):
        if case.get("ignored"):
            print(f"skipped, a prerequisite is missing: {binary} {name}", file=sys.stderr)
            out.append(f"(binary_id({binary}) & test(={name}))")
if out:
    print("not (" + " | ".join(out) + ")")
' || true
}

# The fuzz step (scripts/fuzz) needs the nightly toolchain and cargo-fuzz.
# has_fuzz_prereqs: both there, nothing installed. ensure_fuzz_prereqs:
# installs cargo-fuzz (pinned by its lock file) into
# ~/.cache/affinity/tools when missing, and sets CARGO_FUZZ to run it.
fuzz_tools="${XDG_CACHE_HOME:-$HOME/.cache}/affinity/tools"
has_fuzz_prereqs() {
  cargo +nightly --version >/dev/null 2>&1 || return 1
  command -v cargo-fuzz >/dev/null 2>&1 || [ -x "$fuzz_tools/bin/cargo-fuzz" ]
}
ensure_fuzz_prereqs() {
  if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "error: the nightly toolchain is needed to fuzz (rustup toolchain install nightly)" >&2
    return 1
  fi
  if command -v cargo-fuzz >/dev/null 2>&1; then
    CARGO_FUZZ="cargo-fuzz fuzz"
  else
    if [ ! -x "$fuzz_tools/bin/cargo-fuzz" ]; then
      say "installing cargo-fuzz into $fuzz_tools"
      cargo install cargo-fuzz --locked --root "$fuzz_tools"
    fi
    CARGO_FUZZ="$fuzz_tools/bin/cargo-fuzz fuzz"
  fi
  # cargo-fuzz runs `cargo`: the nightly one.
  export RUSTUP_TOOLCHAIN=nightly
}
