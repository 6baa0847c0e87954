#!/usr/bin/env bash
# Start the local services the test suite talks to, if they are not already listening.
# Each command is the one this machine's services were started with; a service that is
# not installed is reported, and the tests that need it fail with a clear connection error.
set -u

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {  # port, name
  for _ in $(seq 1 60); do listening "$1" && return 0; sleep 1; done
  echo "ensure-services: $2 did not start listening on port $1" >&2
  return 1
}

start() {  # port, name, command...
  local port=$1 name=$2; shift 2
  if listening "$port"; then return 0; fi
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "ensure-services: $name is down and '$1' is not installed" >&2
    return 1
  fi
  echo "ensure-services: starting $name"
  "$@" >/dev/null 2>&1 || true
  wait_for "$port" "$name"
}

status=0
start 5432 PostgreSQL pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql 2>/dev/null | head -n1)" main start || status=1
start 3306 MariaDB start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || status=1
start 6379 Redis redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || status=1
start 5672 RabbitMQ rabbitmq-server -detached || status=1
start 4222 "NATS (JetStream)" start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || status=1
exit $status
