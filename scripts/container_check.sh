#!/bin/bash
# The container really runs: build the image, start it with Docker Compose against PostgreSQL in a container,
# migrate, wait for /readyz, stream one WAV over the WebSocket, read the final back over REST, stop the server
# with SIGTERM and check that the drain closed the live session cleanly (reconnect + 1012). CPU only.
#
#   scripts/container_check.sh            # as root, dockerd running: ~8 min the first time (2 cores), ~1 min after
#   KEEP=1 scripts/container_check.sh     # leave the stack up afterwards (docker-compose -p captions-check ...)
#
# Needs: docker (apt-get install docker.io; dockerd running), Docker Compose (the v2 plugin or Debian's
# docker-compose 1.29), debootstrap, espeak-ng and the project's .venv (httpx, websockets, numpy, soxr, PyYAML).
# No image registry is used: the base image is Debian bookworm from Debian's packages (scripts/base_image.sh),
# PostgreSQL is Debian's package (deploy/postgres/), torch is the local CPU wheel (deploy/wheels/, TORCH_WHEEL).
# Idempotent: images and secrets are kept and rebuilt incrementally; the compose project is removed with its
# volumes before each run (and after it, unless KEEP=1). Not part of `make test` (too slow); docs/deploy.md.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
WORK=$ROOT/build/container-check
PROJECT=${CHECK_PROJECT:-captions-check}
PORT=${CHECK_PORT:-18000}
BASE=http://127.0.0.1:$PORT
PY=${PYTHON:-$ROOT/.venv/bin/python}
# Debian's python3.11 (3.11.2) cannot unpack .nemo files with NeMo 3.0.0 (no tarfile filters, PEP 706): by
# default the base image gets the CPython 3.11 this project's .venv was made from, when it is a shared build
# outside /usr (pyenv's); PYTHON_PREFIX= (empty) keeps Debian's (scripts/base_image.sh).
if [ -z "${PYTHON_PREFIX+set}" ]; then
    PYTHON_PREFIX=$(sed -n 's/^home = \(.*\)\/bin$/\1/p' "$ROOT/.venv/pyvenv.cfg" 2>/dev/null || true)
    case $PYTHON_PREFIX in /usr | /usr/local | "") PYTHON_PREFIX= ;; esac
    [ -e "$PYTHON_PREFIX/lib/libpython3.11.so.1.0" ] || PYTHON_PREFIX=
fi
if [ -n "$PYTHON_PREFIX" ]; then
    version=$("$PYTHON_PREFIX/bin/python3.11" -c 'import platform; print(platform.python_version())')
    BASE_IMAGE=${BASE_IMAGE:-captions-base:bookworm-py$version}
    BUILD_PACKAGES=build-essential
else
    BASE_IMAGE=${BASE_IMAGE:-captions-base:bookworm}
    BUILD_PACKAGES="build-essential python3.11-dev"
fi
export PYTHON_PREFIX BASE_IMAGE
APP_IMAGE=${APP_IMAGE:-captions:local}
DB_IMAGE=${DB_IMAGE:-captions-postgres:local}
TORCH_VERSION=2.13.0
TORCH_WHEEL=${TORCH_WHEEL:-$(ls /opt/wheels/torch-"$TORCH_VERSION"+cpu-*.whl 2>/dev/null | head -n1 || true)}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-600}
SENTENCE="The weather is quite pleasant today, and the children are playing in the garden."
mkdir -p "$WORK"

declare -a RESULTS=()
FAILED=0
T0=$SECONDS
log() { printf '[%s +%4ds] %s\n' "$(date -u +%H:%M:%S)" "$((SECONDS - T0))" "$*"; }
pass() { RESULTS+=("PASS  $*"); log "PASS  $*"; }
fail() { RESULTS+=("FAIL  $*"); log "FAIL  $*"; FAILED=1; }
die() { fail "$*"; exit 1; }

if docker compose version >/dev/null 2>&1; then
    COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then
    COMPOSE=(docker-compose)
else
    echo "needs Docker Compose: the docker compose plugin, or apt-get install docker-compose" >&2
    exit 2
fi
DC=("${COMPOSE[@]}" -p "$PROJECT" -f "$WORK/compose.yml")

summary() {
    local status=$?
    if [ "${KEEP:-0}" != 1 ] && [ -f "$WORK/compose.yml" ]; then
        "${DC[@]}" logs --no-color >"$WORK/compose.log" 2>&1 || true
        "${DC[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
    fi
    echo
    echo "== container check summary ($((SECONDS - T0)) s; logs in ${WORK#"$ROOT"/}/) =="
    printf '%s\n' "${RESULTS[@]}"
    if [ "$FAILED" = 0 ] && [ "$status" = 0 ]; then
        echo "RESULT: PASS"
    else
        echo "RESULT: FAIL"
        [ "$status" != 0 ] || status=1
    fi
    exit "$status"
}
trap summary EXIT
trap 'exit 130' INT TERM

docker info >/dev/null 2>&1 || die "docker daemon not reachable (as root: apt-get install -y docker.io; dockerd &)"
log "compose: ${COMPOSE[*]} ($("${COMPOSE[@]}" version --short 2>/dev/null || echo '?'))"

# 1. Images: the Debian base, the app (CPU torch from deploy/wheels/), PostgreSQL from Debian's package.
step=$SECONDS
scripts/base_image.sh >"$WORK/base-image.log" 2>&1 || die "base image (see $WORK/base-image.log)"
pass "base image $BASE_IMAGE, $(docker run --rm "$BASE_IMAGE" python --version 2>&1) ($((SECONDS - step)) s)"
if [ -n "$TORCH_WHEEL" ]; then
    cmp -s "$TORCH_WHEEL" "deploy/wheels/$(basename "$TORCH_WHEEL")" || cp "$TORCH_WHEEL" deploy/wheels/
    log "torch wheel: deploy/wheels/$(basename "$TORCH_WHEEL")"
fi
step=$SECONDS
log "building $APP_IMAGE (log: ${WORK#"$ROOT"/}/build-app.log)"
# The deps stage is tagged too: the legacy builder caches in images, and an untagged stage would be lost to
# `docker image prune`, costing a full reinstall of the dependencies (about 5 min) on the next run.
build_args=(--build-arg PYTHON_IMAGE="$BASE_IMAGE" --build-arg "BUILD_PACKAGES=$BUILD_PACKAGES")
{ DOCKER_BUILDKIT=0 docker build "${build_args[@]}" --target deps -t "$APP_IMAGE-deps" . \
    && DOCKER_BUILDKIT=0 docker build "${build_args[@]}" -t "$APP_IMAGE" .; } >"$WORK/build-app.log" 2>&1 \
    || die "build $APP_IMAGE (see $WORK/build-app.log)"
size=$(docker image inspect -f '{{.Size}}' "$APP_IMAGE")
pass "image $APP_IMAGE built ($((SECONDS - step)) s, $((size / 1000000)) MB)"
step=$SECONDS
DOCKER_BUILDKIT=0 docker build --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$DB_IMAGE" deploy/postgres \
    >"$WORK/build-db.log" 2>&1 || die "build $DB_IMAGE (see $WORK/build-db.log)"
pass "image $DB_IMAGE built ($((SECONDS - step)) s)"

# The image holds the service only, and its command starts without the tools.
docker run --rm --entrypoint sh "$APP_IMAGE" -c \
    'test ! -e /app/eval && test ! -e /app/loadtest && test ! -e /app/training && captions --help >/dev/null' \
    && pass "image has no eval/, loadtest/, training/; \`captions --help\` runs" \
    || fail "image contents or \`captions --help\`"
user=$(docker image inspect -f '{{.Config.User}}' "$APP_IMAGE")
[ "$user" = "10001:10001" ] && pass "image runs as $user" || fail "image user is '$user'"

# 2. Secrets of the check (kept between runs) and its compose file.
mkdir -p "$WORK/secrets"
chmod 700 "$WORK/secrets"
for spec in postgres_password:32 captions_secret_key:32 captions_admin_password:12; do
    name=${spec%%:*}
    [ -s "$WORK/secrets/$name" ] || od -An -tx1 -N"${spec##*:}" /dev/urandom | tr -d ' \n' >"$WORK/secrets/$name"
    chmod 444 "$WORK/secrets/$name"
done
"$PY" scripts/container_compose.py --out "$WORK/compose.yml" --secrets "$WORK/secrets" --port "$PORT" \
    --app-image "$APP_IMAGE" --db-image "$DB_IMAGE" --nofile "$(ulimit -Hn)"
"${DC[@]}" config -q || die "compose file rejected"

# 3. Up: db (healthy) -> migrate (exit 0) -> app; a previous run's stack and volumes go first.
"${DC[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
step=$SECONDS
"${DC[@]}" up -d >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; die "compose up (see $WORK/up.log)"; }
migrate_id=$("${DC[@]}" ps -a -q migrate)
migrate_exit=$(docker inspect -f '{{.State.ExitCode}}' "$migrate_id")
migrate_out=$(docker logs "$migrate_id" 2>&1 | tail -n1)
if [ "$migrate_exit" = 0 ] && [[ "$migrate_out" == "database at head"* ]]; then
    pass "migrations applied (${migrate_out})"
else
    die "migrate exited $migrate_exit: $migrate_out"
fi
app_id=$("${DC[@]}" ps -q app)
log "waiting for $BASE/readyz (up to $READY_TIMEOUT_S s)"
until [ "$(curl -s -o /dev/null -w '%{http_code}' --noproxy '*' "$BASE/readyz")" = 200 ]; do
    [ "$(docker inspect -f '{{.State.Running}}' "$app_id")" = true ] || die "app exited: $(docker logs --tail 20 "$app_id" 2>&1)"
    if docker logs "$app_id" 2>&1 | grep -q engine_start_failed; then
        die "the app could not load its model (engine_start_failed; try: docker exec $app_id python -c \"import asyncio; from backend.app import build_engine; from backend.config import Settings; asyncio.run(build_engine(Settings()).start())\")"
    fi
    [ $((SECONDS - step)) -lt "$READY_TIMEOUT_S" ] || die "/readyz not 200 after $READY_TIMEOUT_S s"
    sleep 2
done
pass "/readyz 200 $((SECONDS - step)) s after compose up: $(curl -s --noproxy '*' "$BASE/readyz")"
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$app_id")" != starting ]; do sleep 2; done
health=$(docker inspect -f '{{.State.Health.Status}}' "$app_id")
[ "$health" = healthy ] && pass "docker healthcheck: $health" || fail "docker healthcheck: $health"

# 4. One WAV over the WebSocket, the finals read back over REST, then SIGTERM during a live session.
"$PY" - "$WORK/speech.wav" "$SENTENCE" <<'PYTHON'
import subprocess, sys, tempfile
import numpy as np, soundfile, soxr
out, sentence = sys.argv[1], sys.argv[2]
with tempfile.NamedTemporaryFile(suffix=".wav") as raw:
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", raw.name, sentence], check=True)
    audio, rate = soundfile.read(raw.name, dtype="float32")
audio = soxr.resample(audio, rate, 16000) if rate != 16000 else audio
pad = np.zeros(8000, np.float32)
soundfile.write(out, np.concatenate([pad, audio, pad, pad, pad]), 16000, subtype="PCM_16")
PYTHON
step=$SECONDS
set +e
"$PY" scripts/container_client.py --base "$BASE" --password-file "$WORK/secrets/captions_admin_password" \
    --wav "$WORK/speech.wav" --stop-command "${DC[*]} stop app" >"$WORK/client.json" 2>"$WORK/client.err"
client_status=$?
set -e
if [ ! -s "$WORK/client.json" ]; then
    cat "$WORK/client.err" >&2
    die "client failed (status $client_status, see $WORK/client.err)"
fi
"$PY" - "$WORK/client.json" <<'PYTHON' >"$WORK/client.summary"
import json, sys
r = json.load(open(sys.argv[1]))
s, d = r["stream"], r.get("drain", {})
print(f"stream: {s['audio_s']} s of audio, {s['partials']} partials, close {s['close_code']}")
print(f"final text: {' '.join(s['finals'])!r}")
print(f"over REST:  {' '.join(s['rest_captions'])!r}")
if d:
    print(f"drain: reconnect={d['reconnect']}, close {d['close_code']} {d['closed_after_sigterm_s']} s after SIGTERM")
for name, ok in r["checks"].items():
    print(("PASS  " if ok else "FAIL  ") + name)
PYTHON
while read -r line; do
    case $line in
        PASS\ \ *) pass "${line#PASS  }" ;;
        FAIL\ \ *) fail "${line#FAIL  }" ;;
        *) log "$line"; RESULTS+=("      $line") ;;
    esac
done <"$WORK/client.summary"

# 5. The server drained and exited by itself, before stop_grace_period (Docker's SIGKILL would be exit 137).
# uvicorn re-raises the SIGTERM it handled once it has shut down, so a clean stop exits 143 (128 + 15).
state=$(docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}}' "$app_id")
docker logs "$app_id" >"$WORK/app.log" 2>&1 || true
drained=$(grep -c -E '"event": "(drain_started|drain_finished)"|"code": 1012, "reason": "server restarting"|Finished server process' "$WORK/app.log" || true)
if [[ "$state" =~ ^exited\ exit=(0|143)\ oom=false$ ]] && [ "$drained" -ge 4 ]; then
    pass "app drained and exited on SIGTERM ($state; log: drain_started, session closed 1012, drain_finished, Finished server process)"
else
    fail "app after SIGTERM: $state, drain log lines: $drained/4"
fi

# 6. Persist before send: the finals the drained session received are in the database (db still runs).
if [ -s "$WORK/client.json" ] && grep -q '"drain"' "$WORK/client.json"; then
    meeting=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["drain"]["meeting_id"])' "$WORK/client.json")
    sent=$("$PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["drain"]["finals"]))' "$WORK/client.json")
    stored=$("${DC[@]}" exec -T db psql -U captions -d captions -tA \
        -c "SELECT text FROM caption_segments WHERE meeting_id = $meeting ORDER BY seq")
    if [ "$stored" = "$sent" ]; then
        pass "drained session's finals are in PostgreSQL ($(printf '%s' "$stored" | grep -c . || true) row(s): ${stored//$'\n'/ | })"
    else
        fail "drained session: sent finals '${sent//$'\n'/ | }' but stored '${stored//$'\n'/ | }'"
    fi
fi
log "app log: ${WORK#"$ROOT"/}/app.log; client: ${WORK#"$ROOT"/}/client.json"
