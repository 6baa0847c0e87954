#!/usr/bin/env bash
# The history pipeline's tests run real Spark: a Java runtime (17+) and the JDBC drivers
# of the test databases, from Debian's packages. Install what is missing when we may
# (root with apt-get); otherwise say what to install. The tests fail, naming the package,
# if something is still missing: they never skip.
set -u
packages=()
java_ok() {
  local java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  command -v "$java" >/dev/null 2>&1 || return 1
  local major
  major=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ "${major:-0}" -ge 17 ]
}
java_ok || packages+=(openjdk-17-jre-headless)
[ -e /usr/share/java/postgresql.jar ] || packages+=(libpostgresql-jdbc-java)
[ -e /usr/share/java/mariadb-java-client.jar ] || packages+=(libmariadb-java)
[ -e /usr/share/java/sqlite-jdbc.jar ] || packages+=(libxerial-sqlite-jdbc-java)
[ -e /usr/share/java/jtds.jar ] || packages+=(libjtds-java)
[ ${#packages[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-spark: installing ${packages[*]} for the Spark tests"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}") >/dev/null 2>&1; then
    echo "ensure-spark: could not install ${packages[*]}; the Spark tests will fail until they are installed" >&2
  fi
else
  echo "ensure-spark: missing ${packages[*]}; install them (apt-get install ${packages[*]}) or the Spark tests will fail" >&2
fi
exit 0
