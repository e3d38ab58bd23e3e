#!/bin/sh
# Installs the PostgreSQL server that the tests of the PostgreSQL store start as throw-away
# clusters (tests/pgcluster.py: initdb and pg_ctl in a temporary folder, run as `postgres`).
# Debian's package, through apt-get, as root. No cluster of the system's own is created
# or started: the tests never use one. Without root or apt-get this says so, and the
# PostgreSQL tests skip (in CI, where CI=true, they fail instead).
set -u
have_server() {
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
if have_server && id postgres >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  started=$(date +%s)
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/oomdoctor-tests.conf
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      postgresql >/dev/null) || { echo "install-postgres: apt-get could not install postgresql"; exit 0; }
  echo "install-postgres: PostgreSQL installed in $(( $(date +%s) - started )) s"
else
  echo "install-postgres: no PostgreSQL server and no root apt-get; the PostgreSQL tests will be skipped"
fi
exit 0
