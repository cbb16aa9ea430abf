#!/bin/sh
# Writes the secrets docker-compose.yml mounts, once, as random hex: deploy/secrets/postgres_password,
# captions_secret_key and captions_admin_password (the first admin's password). An existing file is kept:
# rotating the database password needs ALTER ROLE as well (docs/deploy.md). With --self-signed HOSTNAME it also writes a throw-away certificate to deploy/tls/
# for a first test; browsers warn about it, use a real certificate for users.
set -eu
cd "$(dirname "$0")"
umask 077
mkdir -p secrets tls
# The files are bind-mounted into containers whose users differ from yours: the folder stays private (0700)
# and the files are made readable (0444) so the non-root service can read its mounted copy.
chmod 700 secrets tls

random_hex() {
    od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n'
}

for spec in postgres_password:32 captions_secret_key:32 captions_admin_password:12; do
    name=${spec%%:*}
    if [ -s "secrets/$name" ]; then
        echo "kept     deploy/secrets/$name"
    else
        random_hex "${spec##*:}" > "secrets/$name"
        echo "wrote    deploy/secrets/$name"
    fi
    chmod 444 "secrets/$name"
done

if [ "${1:-}" = "--self-signed" ]; then
    host=${2:?usage: deploy/make-secrets.sh --self-signed HOSTNAME}
    if [ -e tls/fullchain.pem ] || [ -e tls/privkey.pem ]; then
        echo "kept     deploy/tls/fullchain.pem and privkey.pem (delete them to make new ones)"
        exit 0
    fi
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$host" \
        -addext "subjectAltName=DNS:$host" \
        -keyout tls/privkey.pem -out tls/fullchain.pem 2>/dev/null
    chmod 400 tls/privkey.pem
    chmod 444 tls/fullchain.pem
    echo "wrote    deploy/tls/fullchain.pem and privkey.pem (self-signed for $host, 30 days)"
fi
