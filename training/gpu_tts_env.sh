# Source from the repo root (bash):   source training/gpu_tts_env.sh   (after training/gpu_pack.sh)
# Unpacks .gpu/debs/*.deb (Debian 12 bookworm amd64 builds of espeak-ng 1.51 and
# flite 2.2 plus their shared libraries) into /tmp/ttsroot -- never into / --
# and puts small wrapper scripts for `espeak-ng` and `flite` first on PATH.
#
# The wrappers set LD_LIBRARY_PATH (and ESPEAK_DATA_PATH) only for the TTS
# process itself.  LD_LIBRARY_PATH is deliberately NOT exported into this shell:
# the bundle carries its own liblzma/libzstd/libsystemd/libgcrypt/libX11...
# and exporting it globally could shadow newer system copies that python/torch use.
# Set TTS_EXPORT_LD_LIBRARY_PATH=1 before sourcing if you really want it exported.


_tts_dir="${GPU_PACK:-.gpu}"
export TTS_ROOT=/tmp/ttsroot

if [ ! -x "$TTS_ROOT/usr/bin/espeak-ng" ] || [ ! -x "$TTS_ROOT/usr/bin/flite" ] \
   || [ ! -d "$TTS_ROOT/usr/lib/x86_64-linux-gnu/espeak-ng-data" ]; then
  mkdir -p "$TTS_ROOT"
  for _tts_deb in "$_tts_dir"/debs/*.deb; do
    if [ "${TTS_NO_DPKG:-0}" != 1 ] && command -v dpkg-deb >/dev/null 2>&1 \
       && dpkg-deb -x "$_tts_deb" "$TTS_ROOT" 2>/dev/null; then
      :
    else
      # Fallback without dpkg: a .deb is an ar archive holding data.tar.xz
      python3 - "$_tts_deb" "$TTS_ROOT" <<'PYEOF' || echo "setup.sh: python extract failed: $_tts_deb" >&2
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
b = open(deb, 'rb').read()
assert b[:8] == b'!<arch>\n', deb
i = 8
while i + 60 <= len(b):
    name = b[i:i+16].decode().strip().rstrip('/')
    size = int(b[i+48:i+58].decode().strip())
    if name.startswith('data.tar'):
        with tarfile.open(fileobj=io.BytesIO(b[i+60:i+60+size]), mode='r:*') as t:
            try:
                t.extractall(dest, filter='tar')
            except TypeError:
                t.extractall(dest)
        break
    i += 60 + size + (size & 1)
PYEOF
    fi
  done
fi

export TTS_LD_LIBRARY_PATH="$TTS_ROOT/usr/lib/x86_64-linux-gnu:$TTS_ROOT/lib/x86_64-linux-gnu:$TTS_ROOT/usr/lib/x86_64-linux-gnu/pulseaudio"
# espeak-ng looks for "$ESPEAK_DATA_PATH/espeak-ng-data" (falls back to the
# compiled-in /usr/lib/x86_64-linux-gnu/espeak-ng-data, absent on the remote).
export ESPEAK_DATA_PATH="$TTS_ROOT/usr/lib/x86_64-linux-gnu"

mkdir -p "$TTS_ROOT/bin"
for _tts_prog in espeak-ng flite; do
  cat > "$TTS_ROOT/bin/$_tts_prog" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$TTS_LD_LIBRARY_PATH\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \\
ESPEAK_DATA_PATH="$ESPEAK_DATA_PATH" \\
exec "$TTS_ROOT/usr/bin/$_tts_prog" "\$@"
EOF
  chmod +x "$TTS_ROOT/bin/$_tts_prog"
done

case ":$PATH:" in
  *":$TTS_ROOT/bin:"*) ;;
  *) export PATH="$TTS_ROOT/bin:$PATH" ;;
esac
hash -r 2>/dev/null

if [ "${TTS_EXPORT_LD_LIBRARY_PATH:-0}" = 1 ]; then
  export LD_LIBRARY_PATH="$TTS_LD_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
unset _tts_dir _tts_deb _tts_prog
